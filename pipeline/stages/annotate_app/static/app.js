// The annotation page: fetch the next item, show it, send the choice (click or keys 1-5).
// The token comes from the link (#token=...) or the form, and is kept for this browser tab only.
"use strict";
(function () {
  const CHOICES = ["first", "second", "both", "neither", "cannot_tell"];
  const $ = (id) => document.getElementById(id);
  let token = null, item = null, busy = false;

  function readToken() {
    const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
    if (match) {
      sessionStorage.setItem("foilforge-token", decodeURIComponent(match[1]));
      history.replaceState(null, "", location.pathname);  // keep the token out of the address bar
    }
    return sessionStorage.getItem("foilforge-token");
  }

  function show(section) {
    for (const id of ["login", "task", "done"]) $(id).hidden = id !== section;
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

  function showImage(url, file) {
    const image = $("image");
    $("placeholder").hidden = true;
    image.hidden = false;
    image.onerror = () => {
      image.hidden = true;
      $("placeholder-file").textContent = file;
      $("placeholder").hidden = false;
    };
    image.src = url;
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
    showImage(item.image_url, decodeURIComponent(item.image_url.replace(/^\/images\//, "")));
    // the texts are HTML made by foilforge: escaped words with <b> on the differing ones
    $("text-1").innerHTML = item.text_1;
    $("text-2").innerHTML = item.text_2;
    $("progress").textContent = item.done + " / " + item.total;
    show("task");
    // a focused button would take Enter/Space as an answer to the next item
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    document.body.dataset.itemId = item.item_id;
  }

  async function choose(choice) {
    if (!item || busy) return;
    busy = true;
    for (const button of document.querySelectorAll("#choices button")) button.disabled = true;
    try {
      const response = await api("/api/answer", {
        method: "POST", body: JSON.stringify({ item_id: item.item_id, choice: choice }),
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
      for (const button of document.querySelectorAll("#choices button")) button.disabled = false;
    }
  }

  document.querySelectorAll("#choices button").forEach((button) => {
    button.addEventListener("click", () => choose(button.dataset.choice));
  });
  document.addEventListener("keydown", (event) => {
    if (event.target.tagName === "INPUT" || event.altKey || event.ctrlKey || event.metaKey) return;
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
