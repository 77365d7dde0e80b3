// Drive a MedOpenClaw MCP server with the official TypeScript SDK's client (a client this project did not write),
// over stdio or Streamable HTTP. Reads a plan as JSON on stdin:
//   {"transport": "stdio", "command": "...", "args": [...], "env": {...}} or
//   {"transport": "http", "url": "http://127.0.0.1:PORT/mcp", "token": "...", "clients": N}
//   plus "steps": [{"client": 0, "tool": "name", "arguments": {...}}, ...]
// and prints {"server": ..., "tools": [[name, ...] per client], "results": [{isError, content: [types],
// structuredContent} per step]} as JSON. The SDK validates each structuredContent against the tool's outputSchema.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const plan = JSON.parse(Buffer.concat(chunks).toString("utf8"));

function transport() {
  if (plan.transport === "stdio") {
    return new StdioClientTransport({ command: plan.command, args: plan.args, env: plan.env, stderr: "ignore" });
  }
  return new StreamableHTTPClientTransport(new URL(plan.url), {
    requestInit: { headers: { Authorization: `Bearer ${plan.token}` } },
  });
}

const clients = [];
for (let index = 0; index < (plan.clients || 1); index++) {
  const client = new Client({ name: "typescript-sdk-check", version: "1" });
  await client.connect(transport());
  clients.push(client);
}
const tools = [];
for (const client of clients) tools.push((await client.listTools()).tools.map((tool) => tool.name));
const results = [];
for (const step of plan.steps || []) {
  const answer = await clients[step.client || 0].callTool({ name: step.tool, arguments: step.arguments || {} });
  results.push({ isError: Boolean(answer.isError), content: answer.content.map((block) => block.type),
                 structuredContent: answer.structuredContent });
}
const server = clients[0].getServerVersion();
for (const client of clients) await client.close();
process.stdout.write(JSON.stringify({ server, tools, results }));
