#!/usr/bin/env bash
# Start/stop a throwaway MariaDB server in .mariadbtmp/ (usage: scripts/mariadb.sh start|stop).
#
# The server listens on a free port of 127.0.0.1 and keeps its compiled-in defaults (no
# my.cnf is read): the library must not depend on a server's character set or timeouts.
# `start` writes the URL to .mariadbtmp/url; a user `agents` (password `agents`) may create
# and drop databases.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${MARIADB_DIR:-$ROOT/.mariadbtmp}"

log() { echo "mariadb.sh: $*" >&2; }

find_server() {
  local d
  for d in "$(command -v mariadbd 2>/dev/null || true)" /usr/sbin/mariadbd /usr/sbin/mysqld; do
    [[ -n "$d" && -x "$d" ]] && { echo "$d"; return; }
  done
  return 1
}

apt_install() {
  log "$1 not found; installing Debian's $2 with apt-get"
  apt-get -o DPkg::Lock::Timeout=300 update >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y \
    --no-install-recommends "$2" >&2
}

stop() {
  local pid=""
  [[ -f "$DIR/pid" ]] && pid="$(cat "$DIR/pid")"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    log "stopping MariaDB (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}

# Run the client as root through the server's socket (root authenticates by its Unix user).
client() {
  "$CLIENT" --no-defaults --socket="$DIR/sock" -u root "$@"
}

start() {
  stop
  mkdir -p "$DIR/data"
  local port user
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  user="$(id -un)"
  if [[ "$(id -u)" -eq 0 ]]; then
    user=mysql
    chown -R mysql "$DIR"
    runuser -u mysql -- test -w "$DIR/data" || {
      log "user mysql cannot write $DIR (a parent dir is not world-searchable)"; exit 1; }
  fi
  log "installing a data directory in $DIR/data"
  (cd / && "$INSTALL_DB" --no-defaults --user="$user" --datadir="$DIR/data" \
    --auth-root-authentication-method=socket --skip-test-db >"$DIR/install.log" 2>&1) \
    || { log "mariadb-install-db failed; its log follows"; cat "$DIR/install.log" >&2; exit 1; }
  log "starting MariaDB on 127.0.0.1:$port"
  (cd / && exec "$SERVER" --no-defaults --user="$user" --datadir="$DIR/data" \
    --socket="$DIR/sock" --pid-file="$DIR/server.pid" --log-error="$DIR/error.log" \
    --port="$port" --bind-address=127.0.0.1 --skip-name-resolve \
    --max-connections=300 --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
    --innodb-buffer-pool-size=256M) </dev/null >/dev/null 2>&1 &
  echo $! >"$DIR/pid"
  for _ in $(seq 300); do
    client -e "SELECT 1" >/dev/null 2>&1 && break
    kill -0 "$(cat "$DIR/pid")" 2>/dev/null || break
    sleep 0.1
  done
  client -e "SELECT 1" >/dev/null 2>&1 || {
    log "MariaDB did not start; its log follows"; cat "$DIR/error.log" >&2; stop; exit 1; }
  client -e "CREATE USER 'agents'@'127.0.0.1' IDENTIFIED BY 'agents';
    GRANT ALL PRIVILEGES ON *.* TO 'agents'@'127.0.0.1' WITH GRANT OPTION;
    CREATE DATABASE agents;"
  echo "mysql+asyncmy://agents:agents@127.0.0.1:$port/agents" >"$DIR/url"
  log "ready: $(cat "$DIR/url") (pid $(cat "$DIR/pid"))"
}

case "${1:-}" in
  start|stop) ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

SERVER="$(find_server || true)"
if [[ "$1" == start && -z "$SERVER" ]]; then
  apt_install "MariaDB server" mariadb-server
  SERVER="$(find_server)"
fi
INSTALL_DB="$(command -v mariadb-install-db || command -v mysql_install_db || true)"
CLIENT="$(command -v mariadb || command -v mysql || true)"

"$1"
