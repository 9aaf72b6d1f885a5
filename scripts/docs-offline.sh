#!/usr/bin/env bash
# Makes the built docs site load nothing from the network. Material's offline plugin would load
# one script from a CDN: iframe-worker's shim, which lets the search worker run from file://.
# It is fetched once from the npm registry at a pinned version (npm checks the registry's
# integrity hash), cached, and copied into the site with its licence; then no page of the site
# may refer to a script, style sheet or font on another host.
#
#   scripts/docs-offline.sh out/site        (make docs runs it after mkdocs build)
set -euo pipefail
cd "$(dirname "$0")/.."

version=1.0.4
site="${1:?usage: scripts/docs-offline.sh SITE_DIR}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/loadsched/iframe-worker/$version"

if [ ! -f "$cache/package/shim/index.js" ]; then
  scripts/install-packages.sh docs
  rm -rf "$cache" && mkdir -p "$cache"
  (cd "$cache" && npm pack "iframe-worker@$version" --silent >/dev/null && tar xzf "iframe-worker-$version.tgz")
fi
mkdir -p "$site/assets"
cp "$cache/package/shim/index.js" "$site/assets/iframe-worker-shim.js"
cp "$cache/package/LICENSE" "$site/assets/iframe-worker-shim.LICENSE"

# a script, style sheet, font or image from another host would fail to load offline
if grep -rlE --include='*.html' '<(script|img|iframe)[^>]* src="(https?:)?//|<link[^>]* href="(https?:)?//' "$site"; then
  echo "docs: the pages above load a file from another host" >&2
  exit 1
fi
echo "docs: $site reads offline (file://$(realpath "$site")/index.html)"
