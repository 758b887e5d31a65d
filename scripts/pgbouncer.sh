#!/usr/bin/env bash
# Start/stop a throwaway PgBouncer in transaction-pooling mode in front of the throwaway
# PostgreSQL of scripts/pg.sh (usage: scripts/pgbouncer.sh start|stop).
#
# Every database name is passed through to the PostgreSQL server whose URL is in
# .pgtmp/url (or $PGBOUNCER_UPSTREAM_URL). `start` writes PgBouncer's own URL to
# .pgbouncertmp/url.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${PGBOUNCER_DIR:-$ROOT/.pgbouncertmp}"

log() { echo "pgbouncer.sh: $*" >&2; }

# PgBouncer refuses to run as root: run it as the postgres user when we are root.
as_user() {
  if [[ "$(id -u)" -eq 0 ]]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

stop() {
  local pid=""
  [[ -f "$DIR/pid" ]] && pid="$(cat "$DIR/pid")"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    log "stopping PgBouncer (pid $pid)"
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}

start() {
  stop
  local upstream="${PGBOUNCER_UPSTREAM_URL:-}"
  [[ -n "$upstream" ]] || upstream="$(cat "$ROOT/.pgtmp/url" 2>/dev/null || true)"
  [[ -n "$upstream" ]] || { log "no PostgreSQL to stand in front of: run scripts/pg.sh start"; exit 1; }
  local pg_host pg_port pg_user port
  read -r pg_host pg_port pg_user < <(python3 -c '
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(u.hostname or "127.0.0.1", u.port or 5432, u.username or "postgres")' "$upstream")
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  mkdir -p "$DIR"
  echo "\"$pg_user\" \"\"" >"$DIR/users.txt"
  cat >"$DIR/pgbouncer.ini" <<EOF
[databases]
* = host=$pg_host port=$pg_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $DIR/users.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
max_db_connections = 40
logfile = $DIR/log
pidfile = $DIR/pid
EOF
  [[ "$(id -u)" -eq 0 ]] && chown -R postgres "$DIR"
  log "starting PgBouncer on 127.0.0.1:$port in front of $pg_host:$pg_port"
  as_user "$BIN" -d -q "$DIR/pgbouncer.ini" \
    || { log "PgBouncer did not start; its log follows"; cat "$DIR/log" >&2 || true; exit 1; }
  for _ in $(seq 50); do [[ -s "$DIR/pid" ]] && break; sleep 0.1; done
  echo "postgresql+asyncpg://$pg_user@127.0.0.1:$port/postgres" >"$DIR/url"
  log "ready: $(cat "$DIR/url") (pid $(cat "$DIR/pid"))"
}

case "${1:-}" in
  start|stop) ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

BIN="$(command -v pgbouncer || true)"
[[ -z "$BIN" && -x /usr/sbin/pgbouncer ]] && BIN=/usr/sbin/pgbouncer
if [[ "$1" == start && -z "$BIN" ]]; then
  log "PgBouncer not found; installing Debian's pgbouncer with apt-get"
  apt-get -o DPkg::Lock::Timeout=300 update >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y \
    --no-install-recommends pgbouncer >&2
  BIN="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
fi

"$1"
