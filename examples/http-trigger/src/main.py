def handler(event, context):
    name = (event.get("query") or {}).get("name", "world")
    return {
        "message": "hello, %s!" % name,
        "method": event["method"],
        "path": event["path"],
        "body": event["body"],
    }
