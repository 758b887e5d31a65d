#!/usr/bin/env bash
# Start/stop a throwaway PostgreSQL server in .pgtmp/ (usage: scripts/pg.sh start|stop|restart).
# PG_DIR=... puts another one elsewhere; `restart` stops and starts it on the same port.
# It runs with fsync=off (nothing here outlives a crash); PG_FSYNC=on starts one that flushes
# its commits to disk, as a production server does (the benchmark measures both).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${PG_DIR:-$ROOT/.pgtmp}"

log() { echo "pg.sh: $*" >&2; }

# Print the directory holding initdb/pg_ctl (pg_config, then dpkg, then a glob).
find_bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1; then
    d="$(pg_config --bindir 2>/dev/null || true)"
    [[ -n "$d" && -x "$d/initdb" ]] && { echo "$d"; return; }
  fi
  d="$(dpkg -l 'postgresql-[0-9]*' 2>/dev/null | awk '/^ii/ {print $2}' | sort -V | tail -n1 || true)"
  if [[ -n "$d" ]]; then
    d="$(dpkg -L "$d" 2>/dev/null | grep '/bin/initdb$' | head -n1 || true)"
    [[ -n "$d" ]] && { dirname "$d"; return; }
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x "$d/initdb" ]] && { echo "$d"; return; }
  done
  return 1
}

# Run a command as the postgres user when we are root (initdb refuses root).
as_pg() {
  if [[ "$(id -u)" -eq 0 ]]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

stop() {
  local pid=""
  if [[ -f "$DIR/pid" ]]; then pid="$(cat "$DIR/pid")"
  elif [[ -f "$DIR/data/postmaster.pid" ]]; then pid="$(head -n1 "$DIR/data/postmaster.pid")"
  fi
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    log "stopping PostgreSQL (pid $pid)"
    if [[ -n "$BINDIR" ]]; then
      as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
    else
      kill "$pid" 2>/dev/null || true
    fi
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$DIR"
}

start() {
  stop
  mkdir -p "$DIR"
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  if [[ "$(id -u)" -eq 0 ]]; then
    chown postgres "$DIR"
    as_pg test -w "$DIR" || { log "user postgres cannot write $DIR (a parent dir is not world-searchable)"; exit 1; }
  fi
  log "initdb in $DIR/data"
  as_pg "$BINDIR/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
  log "starting PostgreSQL on 127.0.0.1:$port"
  as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w -o \
    "-c listen_addresses=127.0.0.1 -p $port -k '$DIR' -c fsync=${PG_FSYNC:-off} -c max_connections=200" start >/dev/null \
    || { log "pg_ctl start failed; server log follows"; cat "$DIR/log" >&2; exit 1; }
  head -n1 "$DIR/data/postmaster.pid" > "$DIR/pid"
  echo "postgresql+asyncpg://postgres@127.0.0.1:$port/postgres" > "$DIR/url"
  log "ready: $(cat "$DIR/url") (pid $(cat "$DIR/pid"))"
}

restart() {
  log "restarting PostgreSQL"
  as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/log" -m fast -w restart >/dev/null
  head -n1 "$DIR/data/postmaster.pid" > "$DIR/pid"
}

case "${1:-}" in
  start|stop|restart) ;;
  *) echo "usage: $0 start|stop|restart" >&2; exit 2 ;;
esac

BINDIR="$(find_bindir || true)"
if [[ "$1" == start && -z "$BINDIR" ]]; then
  log "PostgreSQL server not found; installing it with apt-get"
  apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2
  BINDIR="$(find_bindir)"
fi

"$1"
