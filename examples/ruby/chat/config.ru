# A Rails Action Cable chat: one room per user, each message broadcast to
# the room. The async adapter (no Redis), so it runs on Debian's packages
# alone: apt-get install ruby-rails ruby-actioncable ruby-websocket-driver
# ruby-nio4r puma. Start it with
#
#   puma -t 5:5 -p 3000 examples/ruby/chat/config.ru
#
# and load it with examples/chat.toml. GET /count answers what the server
# received and broadcast (JSON), to compare with headroom's counts.

require "rails"
require "action_controller/railtie"
require "action_cable/engine"
require "concurrent"

COUNTS = {
  connections: Concurrent::AtomicFixnum.new,
  subscriptions: Concurrent::AtomicFixnum.new,
  messages: Concurrent::AtomicFixnum.new,
}

class ChatApp < Rails::Application
  config.root = __dir__
  config.eager_load = false
  config.logger = Logger.new(nil)
  config.log_level = :warn
  config.secret_key_base = "headroom-chat-example-" + "0" * 40
  config.hosts.clear
  config.action_cable.mount_path = "/cable"
  config.action_cable.cable = { "adapter" => "async" }
  # Browsers send their page's origin; this app is served from loopback.
  config.action_cable.allowed_request_origins = [%r{\Ahttps?://(127\.0\.0\.1|localhost)(:\d+)?\z}]
  # Threads that run channel actions (Rails' default is 4).
  config.action_cable.worker_pool_size = Integer(ENV.fetch("CABLE_WORKERS", "4"))
end

module ApplicationCable
  class Connection < ActionCable::Connection::Base
    def connect
      COUNTS[:connections].increment
    end
  end

  class Channel < ActionCable::Channel::Base
  end
end

class ChatChannel < ApplicationCable::Channel
  def subscribed
    COUNTS[:subscriptions].increment
    stream_from "room_#{params[:room]}"
  end

  def speak(data)
    COUNTS[:messages].increment
    ActionCable.server.broadcast("room_#{params[:room]}", { text: data["text"] })
  end
end

Rails.application.initialize!
ActionCable.server.config.logger = Logger.new(nil)

Rails.application.routes.draw do
  get "/count", to: ->(_env) {
    body = COUNTS.transform_values(&:value).to_json
    [200, { "Content-Type" => "application/json" }, [body]]
  }
  get "/", to: ->(_env) { [200, { "Content-Type" => "text/plain" }, ["chat\n"]] }
end

run Rails.application
