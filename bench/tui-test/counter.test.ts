// The bench's suite for tui-test (bench/src/tui_test.rs): the same scenario
// as counter.scenario.toml beside this file, as a terminal tester can write
// it. The counter runs in tui-test's shell (its `program` option waits up to
// 5 s for the program to exit before the test starts); stdin is a pipe that
// stays open, as under tickbox, and stdout (its protocol frames) goes
// nowhere: a terminal tester has no protocol client. What cannot be
// checked through the screen is done through the program's keys: the state
// is the value it shows, and the tool call (`increment` by 3) is three more
// `+`. The bench runs copies of this file, with COUNTER made absolute.
import { test, expect } from "@microsoft/tui-test";

const COUNTER = "../../tests/ticks/counter.py";

test.use({ rows: 6, columns: 40 });

test("native counter: two keys, state, screen, a tool call", async ({ terminal }) => {
  terminal.submit(`tail -f /dev/null | python3 ${COUNTER} >/dev/null`);
  await expect(terminal.getByText("Counter: 0")).toBeVisible();
  terminal.write("++");
  await expect(terminal.getByText("Counter: 2")).toBeVisible();
  terminal.write("+++");
  await expect(terminal.getByText("Counter: 5")).toBeVisible();
});
