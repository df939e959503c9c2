# Shared by Benchmarks/run and Benchmarks/callgrind-per-file (sourced, not run): the test data
# and the nginx that serves it on loopback.

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
