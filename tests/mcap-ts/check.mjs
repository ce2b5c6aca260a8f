// Reads MCAP files with the MCAP project's TypeScript reader, the library
// the Foxglove and Lichtblick viewers build on (@mcap/core's indexed
// reader, zstd and lz4 from @mcap/support, file access from @mcap/nodejs),
// as a second reader beside Python's `mcap` (tests/mcap_check.py,
// tests/mcap_into_check.py).
//
//   node tests/mcap-ts/check.mjs EXPECTED.json
//
// EXPECTED.json: [{"file": PATH, "profile": "ros2", "topics": {TOPIC: COUNT,
// ...}}, ...]. Each file is opened with the indexed reader (summary, chunk
// index); every message is read with chunk CRCs validated; the messages
// per topic must equal the expected counts exactly (no topic missing, none
// extra), the header's profile the expected one, and the Statistics
// record's message count the number read. Prints one line per file; exits
// 1 on the first difference.
import { open } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { McapIndexedReader } from "@mcap/core";
import { FileHandleReadable } from "@mcap/nodejs";
import { loadDecompressHandlers } from "@mcap/support";

function fail(msg) {
  console.error(`mcap-ts: ${msg}`);
  process.exit(1);
}

const expected = JSON.parse(readFileSync(process.argv[2], "utf8"));
const decompressHandlers = await loadDecompressHandlers();
for (const want of expected) {
  const handle = await open(want.file, "r");
  try {
    const reader = await McapIndexedReader.Initialize({
      readable: new FileHandleReadable(handle),
      decompressHandlers,
    });
    if (want.profile !== undefined && reader.header.profile !== want.profile) {
      fail(`${want.file}: profile ${JSON.stringify(reader.header.profile)}, expected ${JSON.stringify(want.profile)}`);
    }
    const counts = {};
    let total = 0n;
    let last = -1n;
    for await (const m of reader.readMessages({ validateCrcs: true })) {
      if (m.logTime < last) fail(`${want.file}: messages out of log-time order`);
      last = m.logTime;
      const topic = reader.channelsById.get(m.channelId)?.topic;
      if (topic === undefined) fail(`${want.file}: a message on unknown channel ${m.channelId}`);
      counts[topic] = (counts[topic] ?? 0) + 1;
      total += 1n;
    }
    const got = JSON.stringify(Object.fromEntries(Object.entries(counts).sort()));
    const exp = JSON.stringify(Object.fromEntries(Object.entries(want.topics).sort()));
    if (got !== exp) fail(`${want.file}: messages per topic ${got}, expected ${exp}`);
    if (reader.statistics && reader.statistics.messageCount !== total) {
      fail(`${want.file}: Statistics count ${reader.statistics.messageCount} messages, read ${total}`);
    }
    const compressions = [...new Set(reader.chunkIndexes.map((c) => c.compression))].join(",");
    console.log(`mcap-ts: ${want.file}: ${total} messages on ${Object.keys(counts).length} topics, CRCs valid, chunks ${compressions || "(none)"}, profile ${JSON.stringify(reader.header.profile)}`);
  } finally {
    await handle.close();
  }
}
