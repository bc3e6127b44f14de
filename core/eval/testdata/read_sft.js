// Reads an SFT parquet file with DuckDB (npm @duckdb/node-api), a reader
// agentenv did not write, and prints what it found as JSON: the columns'
// types, the rows, each row's messages as a reader addresses them, and
// the file's key-value metadata.
//
//   NODE_MODULES=<folder> node read_sft.js FILE.parquet
const path = require("path");
const { DuckDBInstance } = require(path.join(process.env.NODE_MODULES, "@duckdb/node-api"));

async function main() {
  const file = process.argv[2].replaceAll("'", "''");
  const db = await DuckDBInstance.create(":memory:");
  const conn = await db.connect();
  const all = async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJson();
  const out = {
    columns: await all(`DESCRIBE SELECT * FROM read_parquet('${file}')`),
    rows: await all(`SELECT * FROM read_parquet('${file}')`),
    picked: await all(`SELECT task_id, len(messages) AS n, messages[1].role AS first_role,
      messages[len(messages)].role AS last_role FROM read_parquet('${file}')`),
    metadata: await all(`SELECT decode(key) AS key, decode(value) AS value FROM parquet_kv_metadata('${file}')`),
  };
  process.stdout.write(JSON.stringify(out));
  conn.closeSync();
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
