data "sless_namespace" "me" {}

output "namespace" {
  value = data.sless_namespace.me.namespace
}
