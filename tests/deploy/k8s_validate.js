// k8s_validate.js -- reads Kubernetes objects (YAML, several documents) on
// standard input, validates each against the Kubernetes schemas of its
// apiVersion and kind (kubernetes-models: types, required fields, enums,
// formats; not unknown fields), and prints them as one JSON array for
// check_deploy.py's checks.  Exit 1, with one line per fault, when an
// object is invalid or of a kind it has no schema for.
"use strict";
const fs = require("fs");
const yaml = require("js-yaml");

const docs = yaml.loadAll(fs.readFileSync(0, "utf8")).filter((d) => d);
let faults = 0;
for (const obj of docs) {
    const what = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
    let Model;
    try {
        Model = require(`kubernetes-models/${obj.apiVersion}/${obj.kind}`)[obj.kind];
    } catch (e) {
        console.error(`${what}: no schema for ${obj.apiVersion} ${obj.kind}`);
        faults++;
        continue;
    }
    try {
        new Model(obj).validate();
    } catch (e) {
        console.error(`${what}: ${e.message}`);
        faults++;
    }
}
process.stdout.write(JSON.stringify(docs));
process.exit(faults ? 1 : 0);
