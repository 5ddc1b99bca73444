// SCAFFOLD (issue 40): this module's helper replaces this file. A factory taking admin.js's shared
// helpers and returning the hooks admin.js calls (see "the page modules" at the end of admin.js).
const opcOverview = (ctx) => ({ start() {}, load() {}, refresh() {}, show() {}, update() {} });
