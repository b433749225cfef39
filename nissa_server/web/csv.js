// nissa web page: a CSV cell as every CSV the project writes holds it (leyline/text.py's csv_cell, held to the
// same answers by tests/nissa_server/test_csv_cells.py): text a spreadsheet would read as a formula (it starts
// with = + - @, a tab or a carriage return, and is no number such as -1.5) prefixed with a single quote, as OWASP
// advises; then quoted where it holds a comma, a quote or a line break.
"use strict";

const FORMULA_START = ["=", "+", "-", "@", "\t", "\r"];
const NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

function csvCell(value) {
  let s = String(value);
  if (typeof value !== "number" || !Number.isFinite(value)) {
    if (FORMULA_START.some((c) => s.startsWith(c)) && !NUMBER.test(s)) s = "'" + s;
  }
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}
