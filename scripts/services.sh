#!/usr/bin/env bash
# Installs the servers the test suite starts for itself (it starts and stops them; nothing runs here):
#   redis-server, prometheus-pushgateway, postgresql (FerretDB's faster backend), faketime and chromium from
#   Debian's packages, FerretDB 1.24 built from tools/ferretdb; FerretDB 2.5 built from tools/ferretdb2 and
#   the PostgreSQL extensions it runs on (DocumentDB, pgvector) built by tools/documentdb/build.sh.
# Idempotent and quick when everything is already there. FerretDB's binaries are cached outside the
# checkout, so a fresh clone on the same machine reuses them.
set -euo pipefail
cd "$(dirname "$0")/.."

FERRETDB_BIN="${TICKLOCK_FERRETDB_BIN:-$HOME/.cache/ticklock/bin/ferretdb-v1.24.2}"
FERRETDB2_BIN="${TICKLOCK_FERRETDB2_BIN:-$HOME/.cache/ticklock/bin/ferretdb-v2.5.0}"

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v prometheus-pushgateway >/dev/null || missing+=(prometheus-pushgateway)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v faketime >/dev/null || missing+=(faketime)  # clock-change tests run `ticklock serve` at a chosen instant
command -v chromium >/dev/null || missing+=(chromium)  # the dashboard's tests drive Debian's Chromium (Playwright)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "services: need ${missing[*]}: run 'sudo apt-get install ${missing[*]}'" >&2
    exit 1
  fi
  echo "services: installing ${missing[*]} from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x "$FERRETDB_BIN" ]; then
  command -v go >/dev/null || { echo "services: Go is needed to build FerretDB" >&2; exit 1; }
  echo "services: building FerretDB v1.24.2 into $FERRETDB_BIN (once per machine)"
  mkdir -p "$(dirname "$FERRETDB_BIN")"
  # -checklinkname=0: a dependency uses a //go:linkname the newer Go linker refuses by default
  (cd tools/ferretdb && go build -trimpath -ldflags=-checklinkname=0 -o "$FERRETDB_BIN.tmp" . && mv "$FERRETDB_BIN.tmp" "$FERRETDB_BIN")
fi
tools/documentdb/build.sh  # DocumentDB and pgvector into Debian's PostgreSQL, for FerretDB 2
if [ ! -x "$FERRETDB2_BIN" ]; then
  command -v go >/dev/null || { echo "services: Go is needed to build FerretDB 2" >&2; exit 1; }
  echo "services: building FerretDB v2.5.0 into $FERRETDB2_BIN (once per machine)"
  mkdir -p "$(dirname "$FERRETDB2_BIN")"
  (cd tools/ferretdb2 && go build -trimpath -o "$FERRETDB2_BIN.tmp" . && mv "$FERRETDB2_BIN.tmp" "$FERRETDB2_BIN")
fi
scripts/emulator-venv.sh  # MiniStack, for the deployed-stack tests
echo "services: redis-server, prometheus-pushgateway, postgresql, faketime, chromium, ferretdb 1.24 and ferretdb 2.5 (documentdb) are ready"
