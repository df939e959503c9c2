# Shared by Benchmarks/run and Benchmarks/callgrind-per-file (sourced, not run): the test data,
# the nginx that serves it on loopback, and a throwaway PostgreSQL cluster (workloads Q and H).

# gen_files FOLDER COUNT SIZE: COUNT files of SIZE random bytes, f000000.bin on; kept for the
# next run (a marker names the count and size).
gen_files() {
    local dir=$1 count=$2 size=$3
    [ -f "$dir/.done-$count-$size" ] && return
    mkdir -p "$dir"
    python3 - "$dir" "$count" "$size" <<'PY'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
block = os.urandom(size)
for i in range(n):
    with open(f"{d}/f{i:06d}.bin", "wb") as f:
        f.write(block[i % size:] + block[:i % size])
PY
    touch "$dir/.done-$count-$size"
}

# nginx_start WORK PORT: nginx serving WORK/www on 127.0.0.1–8:PORT (one worker, sendfile,
# keep-alive without limit, no access log except for /e/, an alias of the root whose requests
# and Range headers go to WORK/resume.log); its config, pid and error log live in WORK. Returns
# once it answers, or fails.
nginx_start() {
    local work=$1 port=$2 listens="" n
    for n in 1 2 3 4 5 6 7 8; do listens+="        listen 127.0.0.$n:$port;"$'\n'; done
    cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    log_format resume '\$request_uri \$status \$bytes_sent "\$http_range"';
    sendfile on;
    keepalive_requests 1000000;
    server {
$listens        root $work/www;
        location /e/ { alias $work/www/; access_log $work/resume.log resume; }
    }
}
CONF
    chmod 755 "$work"  # nginx workers run as an unprivileged user
    nginx -c "$work/nginx.conf" -p "$work" || { echo "benchmark: nginx did not start (port $port taken?)" >&2; return 1; }
    for _ in $(seq 50); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && return 0  # any answer, even a 404
        sleep 0.1
    done
    echo "benchmark: nginx does not answer on 127.0.0.1:$port" >&2
    return 1
}

# nginx_stop WORK: stops the nginx started with that WORK folder, and waits for it to exit.
nginx_stop() {
    local pid; pid=$(cat "$1/nginx.pid" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || return 0
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

# pg_start DIR PORT: a throwaway PostgreSQL cluster in DIR (created; handed to the `postgres` user
# when run as root, since initdb refuses root), listening on 127.0.0.1:PORT and a socket in DIR,
# trust authentication for the user `haul`, durability off (fsync, synchronous_commit,
# full_page_writes: a benchmark of the queue's statements, not of the disk). Sets pg_bin. Returns
# once it accepts connections, or fails. pg_stop DIR stops it at once (-m immediate).
pg_find_bin() {
    local initdb
    if initdb=$(command -v initdb 2>/dev/null); then pg_bin=$(dirname "$(readlink -f "$initdb")"); return 0; fi
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ] && [ -x "$pg_bin/pg_ctl" ]
}
pg_as_owner() {  # runs a PostgreSQL server program as the cluster's owner
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_start() {
    local dir=$1 port=$2
    pg_find_bin || { echo "benchmark: PostgreSQL's server programs (initdb, pg_ctl) are not installed" >&2; return 1; }
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    pg_as_owner env -C "$dir" "$pg_bin/initdb" -D "$dir/data" -A trust -U haul --no-sync -E UTF8 --locale=C > "$dir/initdb.log" 2>&1 ||
        { echo "benchmark: initdb failed: $(tail -3 "$dir/initdb.log" | tr '\n' ' ')" >&2; return 1; }
    pg_as_owner env -C "$dir" "$pg_bin/pg_ctl" -w -t 60 -D "$dir/data" -l "$dir/log" start \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        > "$dir/pg_ctl.log" 2>&1 ||
        { echo "benchmark: PostgreSQL did not start on port $port: $(tail -3 "$dir/log" | tr '\n' ' ')" >&2; return 1; }
}
pg_stop() {
    local dir=$1
    [ -f "$dir/data/postmaster.pid" ] || return 0
    pg_find_bin && pg_as_owner env -C / "$pg_bin/pg_ctl" -D "$dir/data" -m immediate -w stop > /dev/null 2>&1 || true
}
# pg_createdb DIR PORT NAME: a fresh, empty database NAME (dropped first if it exists).
pg_createdb() {
    "$pg_bin/psql" -q -h 127.0.0.1 -p "$2" -U haul -d postgres -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" \
        -c "DROP DATABASE IF EXISTS $3" -c "CREATE DATABASE $3" > /dev/null
}
