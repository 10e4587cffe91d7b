def handler(event, context):
    return sum(event["numbers"])
