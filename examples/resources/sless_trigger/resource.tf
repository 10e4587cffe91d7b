# A public URL for a function: no token needed to call it.
resource "sless_trigger" "web" {
  name     = "hello-web"
  function = sless_function.hello.name
  type     = "http"
}

# Calls the function every 5 minutes with a JSON body; a run still going
# skips the next tick (never two runs at once).
resource "sless_trigger" "every_5_minutes" {
  name     = "hello-cron"
  function = sless_function.hello.name
  type     = "cron"
  schedule = "*/5 * * * *"
  payload  = jsonencode({ source = "cron" })
  enabled  = true
}

output "public_url" {
  value = sless_trigger.web.url
}
