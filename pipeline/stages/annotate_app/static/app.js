// The annotation page: fetch the next item, show it, send the choice (click or keys 1-5).
// A group item shows images A and B and texts 1 and 2; the person picks, for each text in turn, the image
// it describes (click, keys 1-5 or A/B; Backspace undoes text 1's pick), and both picks go in one answer.
// The token comes from the link (#token=...) or the form, and is kept for this browser tab only.
"use strict";
(function () {
  const CHOICES = ["first", "second", "both", "neither", "cannot_tell"];
  const PICKS = ["A", "B", "both", "neither", "cannot_tell"];
  const TITLES = { pair: "Which text describes the image?", group: "Which image does each text describe?" };
  const $ = (id) => document.getElementById(id);
  let token = null, item = null, busy = false, picks = {};

  function readToken() {
    const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
    if (match) {
      sessionStorage.setItem("foilforge-token", decodeURIComponent(match[1]));
      history.replaceState(null, "", location.pathname);  // keep the token out of the address bar
    }
    return sessionStorage.getItem("foilforge-token");
  }

  function show(section) {
    for (const id of ["login", "task", "group-task", "done"]) $(id).hidden = id !== section;
  }

  async function api(path, options) {
    const response = await fetch(path, Object.assign({}, options, {
      headers: Object.assign({ "Authorization": "Bearer " + token, "Content-Type": "application/json" },
                             (options || {}).headers || {}),
    }));
    if (response.status === 401) {
      sessionStorage.removeItem("foilforge-token");
      token = null;
      show("login");
      throw new Error("Unknown token: please enter your annotator token.");
    }
    return response;
  }

  function showImage(url, imageId, placeholderId) {
    const image = $(imageId || "image"), placeholder = $(placeholderId || "placeholder");
    placeholder.hidden = true;
    image.hidden = false;
    image.onerror = () => {
      image.hidden = true;
      $(placeholder.id + "-file").textContent = decodeURIComponent(url.replace(/^\/images\//, ""));
      placeholder.hidden = false;
    };
    image.src = url;
  }

  // the text a key answers: the first one without a pick
  function activeText() { return picks[1] === undefined ? 1 : 2; }

  function showPicks() {
    for (const n of [1, 2]) {
      $("group-text-" + n).classList.toggle("active", n === activeText());
      for (const button of document.querySelectorAll('.picks[data-text="' + n + '"] button')) {
        button.setAttribute("aria-pressed", String(button.dataset.pick === picks[n]));
      }
    }
  }

  async function loadNext() {
    $("message").textContent = "";
    const response = await api("/api/next");
    if (response.status === 204) {
      item = null;
      show("done");
      const progress = await (await api("/api/progress")).json();
      $("progress").textContent = progress.done + " / " + progress.total;
      return;
    }
    if (!response.ok) throw new Error("Could not load the next item (HTTP " + response.status + ").");
    item = await response.json();
    const kind = item.kind === "group" ? "group" : "pair";
    $("title").textContent = TITLES[kind];
    document.title = "foilforge: " + TITLES[kind].charAt(0).toLowerCase() + TITLES[kind].slice(1);
    // the texts are HTML made by foilforge: escaped words with <b> on the differing ones
    if (kind === "group") {
      picks = {};
      showImage(item.image_a_url, "image-a", "placeholder-a");
      showImage(item.image_b_url, "image-b", "placeholder-b");
      $("group-text-1-html").innerHTML = item.text_1;
      $("group-text-2-html").innerHTML = item.text_2;
      showPicks();
    } else {
      showImage(item.image_url);
      $("text-1").innerHTML = item.text_1;
      $("text-2").innerHTML = item.text_2;
    }
    $("progress").textContent = item.done + " / " + item.total;
    show(kind === "group" ? "group-task" : "task");
    document.body.dataset.kind = kind;
    // a focused button would take Enter/Space as an answer to the next item
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    document.body.dataset.itemId = item.item_id;
  }

  async function send(answer) {
    if (!item || busy) return;
    busy = true;
    const buttons = document.querySelectorAll("#choices button, .picks button");
    for (const button of buttons) button.disabled = true;
    try {
      const response = await api("/api/answer", {
        method: "POST", body: JSON.stringify(Object.assign({ item_id: item.item_id }, answer)),
      });
      if (!response.ok && response.status !== 409) {
        const body = await response.json().catch(() => ({}));
        throw new Error(body.error || ("HTTP " + response.status));
      }
      await loadNext();
    } catch (err) {
      $("message").textContent = err.message;
    } finally {
      busy = false;
      for (const button of buttons) button.disabled = false;
    }
  }

  function choose(choice) { return send({ choice: choice }); }

  // a group: record the pick for one text; once both texts have one, send them together
  function pick(text, answer) {
    if (!item || item.kind !== "group" || busy) return;
    picks[text] = answer;
    showPicks();
    if (picks[1] !== undefined && picks[2] !== undefined) send({ text_1: picks[1], text_2: picks[2] });
  }

  document.querySelectorAll("#choices button").forEach((button) => {
    button.addEventListener("click", () => choose(button.dataset.choice));
  });
  document.querySelectorAll(".picks button").forEach((button) => {
    button.addEventListener("click", () => pick(Number(button.parentElement.dataset.text), button.dataset.pick));
  });
  document.addEventListener("keydown", (event) => {
    if (event.target.tagName === "INPUT" || event.altKey || event.ctrlKey || event.metaKey) return;
    if (item && item.kind === "group") {
      if (event.key === "Backspace") { event.preventDefault(); delete picks[1]; showPicks(); return; }
      let index = "12345".indexOf(event.key);
      if (index < 0 && event.key.length === 1) index = "ab".indexOf(event.key.toLowerCase());
      if (index >= 0) { event.preventDefault(); pick(activeText(), PICKS[index]); }
      return;
    }
    const index = "12345".indexOf(event.key);
    if (index >= 0) { event.preventDefault(); choose(CHOICES[index]); }
  });
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token").value.trim();
    sessionStorage.setItem("foilforge-token", token);
    loadNext().catch((err) => { $("message").textContent = err.message; });
  });

  token = readToken();
  if (!token) { show("login"); return; }
  loadNext().catch((err) => { $("message").textContent = err.message; });
})();
