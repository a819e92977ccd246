#!/usr/bin/env bash
# Debian packages foilforge needs: WordNet 3.0 (verb constraints; nltk.download cannot
# reach its host offline), Link Grammar (the offline grammaticality alternative) and headless
# Chromium + chromedriver (the annotation page's real-browser test).
set -euo pipefail
packages=(wordnet-base wordnet-sense-index python3-link-grammar link-grammar-dictionaries-en chromium chromium-driver)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if ! command -v apt-get >/dev/null; then
  echo "foilforge setup: please install these Debian/Ubuntu packages (or equivalents): ${missing[*]}" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "foilforge setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
