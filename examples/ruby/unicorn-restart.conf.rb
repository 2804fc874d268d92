# Unicorn for restart studies: USR2 re-execs a new master (a child of the
# old one); once the new master has loaded the app, `before_fork` QUITs the
# old master, so there is always a master accepting — users notice nothing.
worker_processes Integer(ENV.fetch("WORKERS", "2"))
listen ENV.fetch("LISTEN", "127.0.0.1:8080"), backlog: 1024
pid ENV.fetch("PIDFILE", "unicorn.pid")
timeout 30
preload_app true

before_fork do |server, _worker|
  old_pid = "#{server.config[:pid]}.oldbin"
  if File.exist?(old_pid) && server.pid != old_pid
    begin
      Process.kill(:QUIT, File.read(old_pid).to_i)
    rescue Errno::ENOENT, Errno::ESRCH
      # the old master is already gone
    end
  end
end
