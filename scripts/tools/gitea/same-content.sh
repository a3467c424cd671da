#!/usr/bin/env bash
# same-content.sh PATH VERSION SERVED_AS GO_SUM DEST
#
# Copies the module PATH@VERSION, which the module proxy does not serve under
# PATH, from the path that serves it (SERVED_AS@VERSION) into DEST, a writable
# directory a `replace` can point at. It first proves the content is the one
# GO_SUM (the go.sum of the module that requires PATH) pins: Go's h1 hash of the
# copy, taken under PATH@VERSION, and of its go.mod must equal GO_SUM's lines for
# PATH. Any other content, or a go.sum without those lines, stops the build.
set -euo pipefail

path="$1" version="$2" served_as="$3" go_sum="$4" dest="$5"

# h1 DIR PREFIX: Go's dirhash "h1:" of the files under DIR named PREFIX/<file>
# (golang.org/x/mod/sumdb/dirhash.Hash1: the sha256 of "<sha256 hex>  <name>\n"
# lines sorted by name, base64).
h1() {
  local hex
  hex="$(cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort |
    while IFS= read -r f; do printf '%s  %s\n' "$(sha256sum <"$f" | cut -d' ' -f1)" "$2/$f"; done |
    sha256sum | cut -d' ' -f1)"
  printf 'h1:%s' "$(printf '%s' "$hex" | xxd -r -p | base64)"
}

want_zip="$(awk -v p="$path" -v v="$version" '$1 == p && $2 == v { print $3 }' "$go_sum")"
want_mod="$(awk -v p="$path" -v v="$version/go.mod" '$1 == p && $2 == v { print $3 }' "$go_sum")"
[[ -n "$want_zip" && -n "$want_mod" ]] || { echo "$go_sum has no lines for $path $version" >&2; exit 1; }

# The checksum database may have no entry under SERVED_AS (code.gitea.io/sdk has
# none): the hashes above are the check that counts.
dir="$(cd / && GOFLAGS=-mod=mod GONOSUMDB="$served_as" go mod download -json "$served_as@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$dir" ]] || { echo "cannot download $served_as@$version" >&2; exit 1; }

got_zip="$(h1 "$dir" "$path@$version")"
got_mod="h1:$(printf '%s  go.mod\n' "$(sha256sum <"$dir/go.mod" | cut -d' ' -f1)" | sha256sum | cut -d' ' -f1 | xxd -r -p | base64)"
if [[ "$got_zip" != "$want_zip" || "$got_mod" != "$want_mod" ]]; then
  echo "$served_as@$version is not $path@$version: content $got_zip, go.mod $got_mod; $go_sum pins $want_zip, $want_mod" >&2
  exit 1
fi
grep -qE "^module[[:space:]]+$path\$" "$dir/go.mod" || { echo "$served_as@$version does not declare module $path" >&2; exit 1; }

rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
cp -r "$dir" "$dest"
chmod -R u+w "$dest"
echo "$path@$version: the content of $served_as@$version ($want_zip)"
