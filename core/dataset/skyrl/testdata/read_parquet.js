// Reads a parquet file with DuckDB (npm @duckdb/node-api), a reader
// agentenv did not write, and prints what it found as JSON: the columns'
// types, the rows, and the file's row groups and codecs.
//
//   NODE_MODULES=<folder> node read_parquet.js FILE.parquet
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
    // The nested values as a reader addresses them.
    picked: await all(`SELECT prompt[1].role AS first_role, len(prompt) AS messages, episode.task_id AS task_id,
      episode.tools[1] AS first_tool, server.token_var AS token_var, server.attempts + 0 AS attempts
      FROM read_parquet('${file}')`),
    row_groups: await all(`SELECT DISTINCT row_group_id, row_group_num_rows, compression
      FROM parquet_metadata('${file}') ORDER BY row_group_id`),
    logical: await all(`SELECT name, logical_type, converted_type FROM parquet_schema('${file}')`),
  };
  process.stdout.write(JSON.stringify(out));
  conn.closeSync();
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
