// Compile JSON schemas with Ajv in strict mode, the checks MCP clients run on tool schemas (the MCP Inspector's
// strict mode; the TypeScript SDK validates structured results with Ajv): JSON Schema draft-07 (Ajv's default)
// and 2020-12 (MCP's default dialect since 2025-11-25). Reads [{where, schema}] as JSON on stdin and prints
// [{where, dialect, problem}] -- every strict-mode error or warning -- as JSON on stdout.
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const items = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const problems = [];
for (const [dialect, Dialect] of [["draft-07", Ajv], ["2020-12", Ajv2020]]) {
  for (const { where, schema } of items) {
    const report = (problem) => problems.push({ where, dialect, problem: String(problem) });
    const logger = { log() {}, warn: report, error: report };
    // "log": every strict-mode finding is reported (true would stop at the first); invalid schemas still throw
    const ajv = new Dialect({ strict: "log", allErrors: true, logger });
    try {
      ajv.compile(schema);
    } catch (error) {
      report(error.message);
    }
  }
}
process.stdout.write(JSON.stringify(problems));
