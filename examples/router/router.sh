#!/bin/sh
# An HTTP router for the router study: nginx or haproxy on PORT, routing
# 6,000 host names (app0000.example.test … app5999.example.test) to four
# backends by host (app N → backend N mod 4); any other host gets 404, as a
# router that lost a route answers. The config is generated for the
# study's ports, and the router runs in the foreground of the study's
# process group, so the study stops it.
#   router.sh nginx|haproxy PORT MAXCONN BACKEND1 BACKEND2 BACKEND3 BACKEND4
set -eu
kind=$1 port=$2 maxconn=$3
shift 3
dir=$(mktemp -d /tmp/headroom-router-XXXXXX)
trap 'rm -rf "$dir"' EXIT
trap 'exit 0' TERM INT
# host → backend address, one line per app.
i=0
while [ $i -lt 6000 ]; do
  n=$((i % 4 + 1))
  eval "backend=\${$n}"
  printf 'app%04d.example.test 127.0.0.1:%s\n' $i "$backend"
  i=$((i + 1))
done > "$dir/hosts.map"
case $kind in
nginx)
  user=""; [ "$(id -u)" = 0 ] && user="user root;"
  {
    echo "$user"
    echo "worker_processes 1; daemon off; pid $dir/nginx.pid; error_log $dir/error.log;"
    echo "events { worker_connections $maxconn; }"
    echo "http {"
    echo "  access_log off; map_hash_max_size 65536; map_hash_bucket_size 128;"
    echo "  client_body_temp_path $dir/body; proxy_temp_path $dir/proxy;"
    echo "  fastcgi_temp_path $dir/fcgi; uwsgi_temp_path $dir/uwsgi; scgi_temp_path $dir/scgi;"
    echo "  map \$host \$app {"
    echo "    default \"\";"
    sed 's/$/;/' "$dir/hosts.map"
    echo "  }"
    echo "  server {"
    echo "    listen 127.0.0.1:$port backlog=4096;"
    echo "    location / {"
    echo "      if (\$app = \"\") { return 404 \"no such app: \$host\\n\"; }"
    echo "      proxy_pass http://\$app; proxy_set_header Host \$host;"
    echo "      proxy_http_version 1.1; proxy_set_header Connection \"\";"
    echo "    }"
    echo "  }"
    echo "}"
  } > "$dir/nginx.conf"
  exec nginx -p "$dir" -c "$dir/nginx.conf"
  ;;
haproxy)
  # One haproxy backend per app server; the map names the backend.
  sed 's/ 127.0.0.1:\([0-9]*\)$/ b\1/' "$dir/hosts.map" > "$dir/backends.map"
  {
    echo "global"
    echo "  maxconn $maxconn"
    echo "defaults"
    echo "  mode http"
    echo "  timeout connect 5s"
    echo "  timeout client 60s"
    echo "  timeout server 60s"
    echo "  option http-keep-alive"
    echo "frontend router"
    echo "  bind 127.0.0.1:$port"
    echo "  maxconn $maxconn"
    echo "  use_backend %[req.hdr(host),lower,map($dir/backends.map)]"
    echo "  default_backend unknown"
    echo "backend unknown"
    echo "  http-request return status 404 content-type text/plain string \"no such app\""
    for b in "$@"; do
      echo "backend b$b"
      echo "  server app 127.0.0.1:$b"
    done
  } > "$dir/haproxy.cfg"
  exec haproxy -db -f "$dir/haproxy.cfg"
  ;;
*)
  echo "router.sh: unknown router '$kind' (nginx or haproxy)" >&2
  exit 2
  ;;
esac
