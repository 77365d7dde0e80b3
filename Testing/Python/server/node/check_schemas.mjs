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
  // One instance per dialect (building one compiles its meta-schemas: most of the time when made per schema); its
  // logger reports to the schema being compiled, and each schema leaves the instance once compiled, so none is
  // found in its cache or clashes with another's $id
  let report;
  const logger = { log() {}, warn: (problem) => report(problem), error: (problem) => report(problem) };
  // "log": every strict-mode finding is reported (true would stop at the first); invalid schemas still throw
  const ajv = new Dialect({ strict: "log", allErrors: true, logger, addUsedSchema: false });
  for (const { where, schema } of items) {
    report = (problem) => problems.push({ where, dialect, problem: String(problem) });
    try {
      ajv.compile(schema);
    } catch (error) {
      report(error.message);
    }
    ajv.removeSchema(schema);
  }
}
process.stdout.write(JSON.stringify(problems));
