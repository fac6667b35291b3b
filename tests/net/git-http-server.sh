#!/usr/bin/env bash
# A smart-HTTP git server for the tests, made of Debian's nginx-light,
# fcgiwrap and git-http-backend, with basic auth on everything:
#
#   git-http-server.sh start DIR PORT USER PASS   serve DIR/repos on
#                                                 127.0.0.1:PORT
#   git-http-server.sh repo DIR NAME              a bare DIR/repos/NAME.git
#                                                 that takes pushes
#   git-http-server.sh stop DIR
#
# Everything it makes (configuration, sockets, logs, pid files) is in DIR.
set -eu

cmd=$1 dir=$2

start() {
  local port=$1 user=$2 pass=$3
  mkdir -p "$dir/repos" "$dir/tmp"
  printf '%s:%s\n' "$user" "$(openssl passwd -apr1 "$pass")" >"$dir/htpasswd"
  chmod 644 "$dir/htpasswd"
  cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
user root;
events { worker_connections 64; }
http {
  access_log $dir/access.log;
  client_body_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp;
  proxy_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  server {
    listen 127.0.0.1:$port;
    auth_basic "git";
    auth_basic_user_file $dir/htpasswd;
    client_max_body_size 0;
    location / {
      include /etc/nginx/fastcgi_params;
      fastcgi_pass unix:$dir/fcgiwrap.sock;
      fastcgi_param SCRIPT_FILENAME /usr/lib/git-core/git-http-backend;
      fastcgi_param GIT_PROJECT_ROOT $dir/repos;
      fastcgi_param GIT_HTTP_EXPORT_ALL "";
      fastcgi_param PATH_INFO \$uri;
      fastcgi_param REMOTE_USER \$remote_user;
    }
  }
}
CONF
  setsid /usr/sbin/fcgiwrap -s "unix:$dir/fcgiwrap.sock" \
    >"$dir/fcgiwrap.log" 2>&1 </dev/null &
  echo $! >"$dir/fcgiwrap.pid"
  for _ in $(seq 1 50); do
    [ -S "$dir/fcgiwrap.sock" ] && break
    sleep 0.1
  done
  chmod 666 "$dir/fcgiwrap.sock"
  /usr/sbin/nginx -c "$dir/nginx.conf" -g 'daemon on;'
}

repo() {
  local name=$1
  git init -q --bare --initial-branch=main "$dir/repos/$name.git"
  git -C "$dir/repos/$name.git" config http.receivepack true
}

stop() {
  [ -f "$dir/nginx.pid" ] && kill "$(cat "$dir/nginx.pid")" 2>/dev/null
  [ -f "$dir/fcgiwrap.pid" ] && kill "$(cat "$dir/fcgiwrap.pid")" 2>/dev/null
  rm -f "$dir/nginx.pid" "$dir/fcgiwrap.pid" "$dir/fcgiwrap.sock"
}

shift 2
"$cmd" "$@"
