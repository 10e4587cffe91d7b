# The public URL of an http trigger another configuration manages.
data "sless_trigger" "web" {
  name = "hello-web"
}

output "public_url" {
  value = data.sless_trigger.web.url
}
