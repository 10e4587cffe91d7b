// A hello function: greets the `name` in the request body.
const ms = require("ms");

exports.handler = async (event, context) => {
  const body = event.body && typeof event.body === "object" ? event.body : {};
  const name = body.name || "world";
  const greeting = process.env.GREETING || "hello";
  return {
    message: `${greeting}, ${name}!`,
    runtime: "node",
    timeout: ms((context.timeoutSec || 30) * 1000, { long: true }),
  };
};
