#!/usr/bin/env bash
# build-copy.sh VERSION OUT
#
# Builds Gitea VERSION as the main module of a writable copy of its module
# source: OUT/src is the copy (the bed's STATIC_ROOT_PATH: templates and locales
# are read from it, nothing is embedded), OUT/bin/gitea the binary.
#
# Why not as a dependency of a tools module, as go.mod here builds v1.26.0:
# from v1.27 on, code.gitea.io/gitea declares `module gitea.dev`, which Go
# refuses to require under the path the proxy serves it at. As the main module
# its own replaces apply as written. What the proxy refuses is substituted with
# the identical content, checked against Gitea's own go.sum (same-content.sh):
#
#   gitea.dev/actions-proto-go and gitea.dev/sdk are served as
#   code.gitea.io/actions-proto-go and code.gitea.io/sdk;
#   gitlab.com/gitlab-org/api/client-go/v2 v2.42.0 is refused; v2.40.1 has the
#   identical go.mod and every identifier Gitea uses (GitLab migrations only).
#
# Every version this builds is pinned below by the h1 hash of its module.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$1" out="$2"

case "$version" in
  v1.27.3)
    sum="h1:SRnjvw24ASELKCqyYvAWIlzwOqyFMgfD+UkqQ9SE5eU="
    same=("gitea.dev/actions-proto-go v0.6.0 code.gitea.io/actions-proto-go" "gitea.dev/sdk v1.1.0 code.gitea.io/sdk")
    gitlab="v2.40.1"
    ;;
  *) echo "build-copy.sh: no recipe for Gitea $version (have: v1.27.3)" >&2; exit 2 ;;
esac

json="$(cd / && GOFLAGS=-mod=mod go mod download -json "code.gitea.io/gitea@$version")"
dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")"
got="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"$json")"
[[ "$got" == "$sum" ]] || { echo "code.gitea.io/gitea@$version has hash $got, pinned $sum" >&2; exit 1; }

src="$out/src"
rm -rf "$src.tmp" "$out/deps"
mkdir -p "$out"
cp -r "$dir" "$src.tmp"
chmod -R u+w "$src.tmp"

for s in "${same[@]}"; do
  read -r path v served_as <<<"$s"
  "$here/same-content.sh" "$path" "$v" "$served_as" "$src.tmp/go.sum" "$out/deps/${path//\//_}"
  # Relative, so the copy builds wherever the cache is.
  (cd "$src.tmp" && go mod edit -replace "$path=../deps/${path//\//_}")
done

# The replacement must change nothing Go checks: its go.mod is the one Gitea's go.sum pins.
gl=gitlab.com/gitlab-org/api/client-go/v2
want="$(awk -v p="$gl" '$1 == p && $2 ~ /\/go.mod$/ { print $3; exit }' "$src.tmp/go.sum")"
got="$(cd / && GOFLAGS=-mod=mod go mod download -json "$gl@$gitlab" | sed -n 's/^[[:space:]]*"GoModSum": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$want" && "$got" == "$want" ]] || { echo "$gl@$gitlab has go.mod $got, Gitea's go.sum pins $want" >&2; exit 1; }
(cd "$src.tmp" && go mod edit -replace "$gl=$gl@$gitlab")

mv "$src.tmp" "$src.new" && rm -rf "$src" && mv "$src.new" "$src"

tags="sqlite sqlite_unlock_notify"
mkdir -p "$out/bin"
# -mod=mod: go.sum gains the lines of the gitlab replacement (checked by the
# checksum database); main.Version is what /api/v1/version reports.
(cd "$src" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=1 go build -v -trimpath -tags "$tags" \
  -ldflags "-s -w -X main.Version=${version#v} -X 'main.Tags=$tags'" -o "$out/bin/gitea.tmp" .)
mv "$out/bin/gitea.tmp" "$out/bin/gitea"
