#!/usr/bin/env bash
# npm-ci.sh DIR [NPM-FLAG...]: `npm ci` in DIR through a cache of this
# machine's: the node_modules an install produced is kept under
# $DDBPIPE_CACHE_DIR (default ~/.cache/ddbpipe)/node_modules, keyed by
# DIR's package.json and package-lock.json, the flags and Node's version,
# and a later install of the same pins (a fresh clone's) links it into
# DIR (cp -l; a copy across file systems) instead of installing again:
# a fraction of a second instead of the 2–15 s of CPU that npm ci takes
# per folder here. Nothing is shared for writing: npm ci in DIR replaces
# DIR/node_modules, links and all, and leaves the cache as it was.
set -euo pipefail
dir=${1:?usage: npm-ci.sh DIR [NPM-FLAG...]}
shift
cache=${DDBPIPE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ddbpipe}/node_modules
sum() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
key=$({ cat "$dir/package.json" "$dir/package-lock.json"; node --version; echo "$*"; } | sum | cut -c1-32)
kept=$cache/$key
if [ -d "$kept/node_modules" ]; then
	rm -rf "$dir/node_modules"
	# -P keeps node_modules/.bin's relative symlinks as links.
	cp -RPl "$kept/node_modules" "$dir/" 2>/dev/null || { rm -rf "$dir/node_modules"; cp -RP "$kept/node_modules" "$dir/"; }
	echo "npm ci in $dir: node_modules linked from $kept"
	exit 0
fi
(cd "$dir" && npm ci "$@")
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.new.XXXXXX")
cp -RP "$dir/node_modules" "$tmp/"
# Another install of the same pins may have kept its copy first.
[ -e "$kept" ] || mv "$tmp" "$kept"
rm -rf "$tmp"
