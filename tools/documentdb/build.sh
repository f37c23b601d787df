#!/usr/bin/env bash
# Builds DocumentDB (FerretDB's fork, tag v0.106.0-ferretdb-2.5.0: the PostgreSQL extension FerretDB 2.5
# runs on) and pgvector 0.8.0 (an extension DocumentDB requires), and installs both into Debian's
# PostgreSQL. Run as root by scripts/services.sh, once per machine (about half a minute here); quick when
# both are installed (a stamp in PostgreSQL's extension folder names what was built).
#
# Where the parts come from (nothing here is reachable but the package registries):
# - DocumentDB: the tarball beside this script, `git archive` of that tag without its regression tests
#   (MIT licence, LICENSE inside); its sha256 is checked before anything is installed.
# - pgvector: the Go module proxy serves github.com/pgvector/pgvector@v0.8.0 as a module zip.
# - the rest from Debian: PostgreSQL's server headers (and Kerberos' that they include), rum, pg_cron,
#   postgis, libbson, pcre2 and Intel's decimal math library.
# Where it differs from DocumentDB's own build (each checked by the store's contract suite on it):
# - Debian 12's libbson is 1.23; DocumentDB 0.106 is built against 1.28 upstream and uses one symbol 1.23
#   lacks, BSON_SUBTYPE_SENSITIVE (the BSON binary subtype 8): defined with its value when the installed
#   headers lack it, and, as it is then not a member of the enum it is switched over, that switch's
#   warning is not an error (-Wno-error=switch).
# - Debian 12's pg_cron is 1.4, which takes no "N seconds" schedules; DocumentDB schedules its background
#   index builds every 2 s unless `documentdb.indexBuildScheduleInSec` is 60 or more (then "* * * * *"),
#   so the servers tests/support/servers.py starts set it to 60 (FerretDB 2.5 creates indexes in the
#   foreground: createIndexes does not wait on those jobs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

TAG=v0.106.0-ferretdb-2.5.0
TARBALL="$here/documentdb-$TAG.tar.gz"
SHA256=64630f8ca17f9f86e5efccee4aa36e16b1c97a720828d7d17fd329276a8e801d
PGVECTOR=v0.8.0

postgres="$(ls /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -1 || true)"
if [ -z "$postgres" ]; then
  echo "documentdb: Debian's postgresql is not installed (scripts/services.sh installs it first)" >&2
  exit 1
fi
PG_BINDIR="$(dirname "$postgres")"
MAJOR="$(basename "$(dirname "$PG_BINDIR")")"
STAMP="/usr/share/postgresql/$MAJOR/extension/ticklock-documentdb.stamp"
WANTED="documentdb $TAG $SHA256, pgvector $PGVECTOR"

# libkrb5-dev: PostgreSQL's server headers include <gssapi/gssapi.h> (Debian builds it with GSSAPI), and
# Debian 12's postgresql-server-dev does not depend on the package that has it (a machine without it
# failed in DocumentDB's src/commands/users.c)
packages=(
  "postgresql-server-dev-$MAJOR" "postgresql-$MAJOR-rum" "postgresql-$MAJOR-cron" "postgresql-$MAJOR-postgis-3"
  libbson-dev libpcre2-dev libintelrdfpmath-dev libkrb5-dev pkg-config gcc make
)
needed=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || needed+=("$p")
done
if [ ${#needed[@]} -eq 0 ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANTED" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "documentdb: DocumentDB is built into PostgreSQL $MAJOR's folders: run 'sudo tools/documentdb/build.sh' once" >&2
  exit 1
fi
echo "$SHA256  $TARBALL" | sha256sum -c --quiet - || { echo "documentdb: $TARBALL is not the tarball expected" >&2; exit 1; }
command -v go >/dev/null || { echo "documentdb: Go is needed to fetch pgvector from the module proxy" >&2; exit 1; }
if [ ${#needed[@]} -gt 0 ]; then
  echo "documentdb: installing ${needed[*]} from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${needed[@]}" >/dev/null
fi
PG_CONFIG="$PG_BINDIR/pg_config"
[ -x "$PG_CONFIG" ] || PG_CONFIG="$(command -v pg_config || true)"
[ -n "$PG_CONFIG" ] || { echo "documentdb: no pg_config after installing postgresql-server-dev-$MAJOR" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
quietly() {  # a build step's output (compiler warnings, PGXS's notes) only when it fails
  if ! "$@" >"$work/step.log" 2>&1; then
    tail -n 40 "$work/step.log" >&2
    echo "documentdb: failed: $*" >&2
    exit 1
  fi
}

echo "documentdb: building pgvector $PGVECTOR for PostgreSQL $MAJOR"
if ! download="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/pgvector/pgvector@$PGVECTOR" 2>&1)"; then
  echo "documentdb: go mod download of pgvector $PGVECTOR failed: $download" >&2
  exit 1
fi
vector_dir="$(printf '%s\n' "$download" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "$vector_dir" ] || { echo "documentdb: go mod download named no folder for pgvector: $download" >&2; exit 1; }
cp -r "$vector_dir" "$work/pgvector" && chmod -R u+w "$work/pgvector"
# OPTFLAGS="": no -march=native, so that the build runs on any x86-64 this machine's image moves to
quietly make -C "$work/pgvector" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" with_llvm=no
quietly make -C "$work/pgvector" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" with_llvm=no install

echo "documentdb: building DocumentDB $TAG for PostgreSQL $MAJOR"
tar -xzf "$TARBALL" -C "$work"
# DocumentDB's build reads Intel's decimal math library through pkg-config, as its own install script
# builds it; Debian's package has no .pc file: this one names its call-by-value, no-globals variant, the
# one that script builds (CALL_BY_REF=0 GLOBAL_RND=0 GLOBAL_FLAGS=0)
bid="$(dpkg-query -L libintelrdfpmath-dev | grep '/libbidgcc000\.a$' | head -1)"
[ -n "$bid" ] || { echo "documentdb: libintelrdfpmath-dev has no libbidgcc000.a" >&2; exit 1; }
cat >"$work/intelmathlib.pc" <<EOF
Name: intelmathlib
Description: Intel Decimal Floating point math library (Debian's libintelrdfpmath-dev)
Version: 2.0 Update 2
Cflags: -I/usr/include
Libs: -L$(dirname "$bid") -lbidgcc000
EOF
export PKG_CONFIG_PATH="$work${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
copt=""
if ! grep -rqs "BSON_SUBTYPE_SENSITIVE" /usr/include/libbson-1.0/; then
  copt="-DBSON_SUBTYPE_SENSITIVE=0x08 -Wno-error=switch"
fi
src="$work/documentdb"
for ext in pg_documentdb_core pg_documentdb; do
  quietly make -C "$src/$ext" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" with_llvm=no "COPT=$copt"
done
for ext in pg_documentdb_core pg_documentdb; do
  quietly make -C "$src/$ext" PG_CONFIG="$PG_CONFIG" with_llvm=no "COPT=$copt" install
done
echo "$WANTED" >"$STAMP"
echo "documentdb: DocumentDB $TAG and pgvector $PGVECTOR installed into PostgreSQL $MAJOR"
