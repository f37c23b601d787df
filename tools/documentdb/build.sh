#!/usr/bin/env bash
# Builds DocumentDB (FerretDB's fork, tag v0.106.0-ferretdb-2.5.0: the PostgreSQL extension FerretDB 2.5
# runs on) and pgvector 0.8.0 (an extension DocumentDB requires), and installs both into Debian's
# PostgreSQL. Run as root by scripts/services.sh, once per machine; quick when both are installed.
#
# Where the parts come from (nothing here is reachable but the package registries):
# - DocumentDB: the tarball beside this script, `git archive` of that tag without its regression tests
#   (MIT licence, LICENSE inside); its sha256 is checked below.
# - pgvector: the Go module proxy serves github.com/pgvector/pgvector@v0.8.0 as a module zip.
# - the rest from Debian: PostgreSQL's server headers, rum, pg_cron, postgis, libbson, pcre2 and Intel's
#   decimal math library.
# Two differences from DocumentDB's own build, both checked by running the store's contract suite on it:
# - Debian 12's libbson is 1.23; DocumentDB 0.106 is built against 1.28 upstream, and uses one symbol
#   1.23 lacks, BSON_SUBTYPE_SENSITIVE (the BSON binary subtype 8): defined here with its value.
# - Debian 12's pg_cron is 1.4, which takes no "N seconds" schedules; DocumentDB schedules its background
#   index builds every 2 s unless `documentdb.indexBuildScheduleInSec` is 60 or more (then "* * * * *"),
#   so the servers tests/support/servers.py starts set it to 60 (their indexes are built in the
#   foreground: createIndexes on an empty or small collection).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

TAG=v0.106.0-ferretdb-2.5.0
TARBALL="$here/documentdb-$TAG.tar.gz"
SHA256=64630f8ca17f9f86e5efccee4aa36e16b1c97a720828d7d17fd329276a8e801d
PGVECTOR=v0.8.0

PG_BINDIR="$(dirname "$(ls /usr/lib/postgresql/*/bin/postgres | sort -V | tail -1)")"
MAJOR="$(basename "$(dirname "$PG_BINDIR")")"
PG_CONFIG="$PG_BINDIR/pg_config"
export PG_CONFIG

packages=(
  "postgresql-server-dev-$MAJOR" "postgresql-$MAJOR-rum" "postgresql-$MAJOR-cron" "postgresql-$MAJOR-postgis-3"
  libbson-dev libpcre2-dev libintelrdfpmath-dev pkg-config gcc make
)
needed=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || needed+=("$p")
done

sharedir="$(dirname "$(ls /usr/share/postgresql/"$MAJOR"/extension/plpgsql.control)")"
if [ ${#needed[@]} -eq 0 ] && [ -f "$sharedir/documentdb--0.105-0--0.106-0.sql" ] && [ -f "$sharedir/vector--0.8.0.sql" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "documentdb: installing it into PostgreSQL $MAJOR needs root (run scripts/services.sh as root)" >&2
  exit 1
fi
if [ ${#needed[@]} -gt 0 ]; then
  echo "documentdb: installing ${needed[*]} from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${needed[@]}" >/dev/null
fi
PG_CONFIG="$PG_BINDIR/pg_config"
[ -x "$PG_CONFIG" ] || PG_CONFIG="$(command -v pg_config)"

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
command -v go >/dev/null || { echo "documentdb: Go is needed to fetch pgvector from the module proxy" >&2; exit 1; }
vector_dir="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/pgvector/pgvector@$PGVECTOR" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "$vector_dir" ] || { echo "documentdb: go mod download gave no directory for pgvector" >&2; exit 1; }
cp -r "$vector_dir" "$work/pgvector" && chmod -R u+w "$work/pgvector"
# OPTFLAGS="": no -march=native, so the build runs on any x86-64 this cache is copied to
quietly make -C "$work/pgvector" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" with_llvm=no
quietly make -C "$work/pgvector" PG_CONFIG="$PG_CONFIG" with_llvm=no install

echo "documentdb: building DocumentDB $TAG for PostgreSQL $MAJOR (a minute)"
echo "$SHA256  $TARBALL" | sha256sum -c --quiet -
tar -xzf "$TARBALL" -C "$work"
# DocumentDB's build reads Intel's decimal math library through pkg-config, as its own install script
# builds it; Debian's package has no .pc file: this one names its call-by-value, no-globals variant, the
# one that script builds (CALL_BY_REF=0 GLOBAL_RND=0 GLOBAL_FLAGS=0)
export PKG_CONFIG_PATH="$here${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
src="$work/documentdb"
quietly make -C "$src/pg_documentdb_core" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" with_llvm=no
quietly make -C "$src/pg_documentdb" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" with_llvm=no \
  "COPT=-DBSON_SUBTYPE_SENSITIVE=0x08 -Wno-error=switch"
quietly make -C "$src/pg_documentdb_core" PG_CONFIG="$PG_CONFIG" with_llvm=no install
quietly make -C "$src/pg_documentdb" PG_CONFIG="$PG_CONFIG" with_llvm=no install
echo "documentdb: DocumentDB $TAG and pgvector $PGVECTOR installed into PostgreSQL $MAJOR"
