// Parses TLA+ modules with the tree-sitter grammar and reports, one fact per
// line on stdout, what `cargo run -p xtask -- check-specs` compares with
// model-check/src/names.rs:
//
//   MODULE <file> <module name>
//   OPERATOR <file> <name>      every operator defined at module level
//   ACTION <file> <name>        every module-level operator that the body
//                               of `Next` names directly (the actions)
//   DESIGN <file> <value>       every string in the body of `Designs`
//                               (the domain of the `Design` constant)
//   SYNTAX <file>:<line>:<col> <ERROR|MISSING> <text>
//
// Usage: node parse.js <file.tla>...  (NODE_PATH must reach the installed
// `tree-sitter` and `@tlaplus/tree-sitter-tlaplus` packages; xtask sets it).
// Exits 1 when any file has an ERROR or MISSING node, 2 on bad usage.
"use strict";

const fs = require("fs");
const Parser = require("tree-sitter");
const TlaPlus = require("@tlaplus/tree-sitter-tlaplus");

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node parse.js <file.tla>...");
  process.exit(2);
}

const parser = new Parser();
parser.setLanguage(TlaPlus);

// Walks a tree without recursion, so a deep expression cannot overflow
// the stack.
function* nodes(root) {
  const stack = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    yield node;
    for (let i = node.childCount - 1; i >= 0; i -= 1) {
      stack.push(node.child(i));
    }
  }
}

function oneLine(text) {
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text);
}

let syntaxErrors = 0;
for (const file of files) {
  // tree-sitter's default buffer is small; give it the whole file.
  const source = fs.readFileSync(file, "utf8");
  const tree = parser.parse(source, null, { bufferSize: source.length * 2 + 1024 });

  for (const node of nodes(tree.rootNode)) {
    if (node.type === "ERROR" || node.isMissing) {
      syntaxErrors += 1;
      const { row, column } = node.startPosition;
      const kind = node.isMissing ? `MISSING ${node.type}` : "ERROR";
      console.log(`SYNTAX ${file}:${row + 1}:${column + 1} ${kind} ${oneLine(node.text)}`);
    }
  }

  for (const module of tree.rootNode.namedChildren.filter((n) => n.type === "module")) {
    const name = module.childForFieldName("name");
    console.log(`MODULE ${file} ${name ? name.text : "?"}`);
    const defined = new Map();
    for (const child of module.namedChildren) {
      if (child.type === "operator_definition" || child.type === "function_definition") {
        const opName = child.childForFieldName("name");
        if (opName) {
          defined.set(opName.text, child);
          console.log(`OPERATOR ${file} ${opName.text}`);
        }
      }
    }
    const designs = defined.get("Designs");
    if (designs) {
      for (const node of nodes(designs.childForFieldName("definition"))) {
        if (node.type === "string") {
          console.log(`DESIGN ${file} ${node.text.slice(1, -1)}`);
        }
      }
    }
    const next = defined.get("Next");
    if (!next) {
      continue;
    }
    const body = next.childForFieldName("definition");
    const actions = new Set();
    for (const node of nodes(body)) {
      if (node.type === "identifier_ref" && defined.has(node.text)) {
        actions.add(node.text);
      }
    }
    for (const action of actions) {
      console.log(`ACTION ${file} ${action}`);
    }
  }
}

process.exit(syntaxErrors > 0 ? 1 : 0);
