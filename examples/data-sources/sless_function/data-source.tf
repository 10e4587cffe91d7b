# A function created by another configuration (or imported), read by name.
data "sless_function" "hello" {
  name = "hello"
}

output "hello_invoke_url" {
  value = data.sless_function.hello.invoke_url
}

output "hello_is_ready" {
  value = data.sless_function.hello.phase == "Ready"
}
