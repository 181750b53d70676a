// The renderer against a tiny fake DOM: keyed by turnId, aria-busy while
// streaming, one announcement at the end, no height collapse on a reset.
import { deepStrictEqual, equal, throws } from "node:assert/strict";
import { test } from "node:test";

import { TurnRenderer } from "../../../src/juno_bind_trio/web/static/renderer.js";
import { FakeElement, fakeDocument, paddedDocument } from "./fake-dom.mjs";

function setup() {
  const container = new FakeElement("main");
  const announcer = new FakeElement("div");
  const renderer = new TurnRenderer(container, { document: fakeDocument, announcer });
  return { container, announcer, renderer };
}

test("one element per turn, keyed by turnId, reused across a reset", () => {
  const { container, renderer } = setup();
  renderer.update("t1", "Let me think");
  const element = renderer.elementFor("t1");
  renderer.update("t1", "");
  renderer.update("t1", "The answer");
  renderer.update("t2", "Next");
  equal(container.children.length, 2);
  equal(renderer.elementFor("t1"), element);
  equal(element.getAttribute("data-turn-id"), "t1");
  equal(element.textContent, "The answer");
});

test("aria-busy while streaming, announced once at the end", () => {
  const { announcer, renderer } = setup();
  renderer.update("t1", "Hel");
  const element = renderer.elementFor("t1");
  equal(element.getAttribute("aria-busy"), "true");
  renderer.update("t1", "Hello");
  deepStrictEqual(announcer.writes, []);
  renderer.finish("t1", "Hello!");
  equal(element.getAttribute("aria-busy"), "false");
  equal(element.textContent, "Hello!");
  renderer.finish("t1", "Hello!");
  deepStrictEqual(announcer.writes, ["Hello!"]);
});

test("a reset keeps the element's height until the turn ends", () => {
  const { renderer } = setup();
  renderer.update("t1", "a partial answer of some length");
  const element = renderer.elementFor("t1");
  const before = element.offsetHeight;
  renderer.update("t1", "");
  equal(element.style.minHeight, `${before}px`);
  renderer.update("t1", "New");
  equal(element.style.minHeight, `${before}px`);
  renderer.finish("t1");
  equal(element.style.minHeight, "");
  equal(element.textContent, "New");
});

test("with padding and borders, the box keeps its height through a reset: no jump", () => {
  const container = new FakeElement("main");
  const renderer = new TurnRenderer(container, { document: paddedDocument });
  renderer.update("t1", "two lines of partial text");
  const element = renderer.elementFor("t1");
  const before = element.laidOutHeight;
  equal(before, 70);
  renderer.update("t1", ""); // the reset
  equal(element.laidOutHeight, before);
  equal(element.style.minHeight, "60px"); // the content box, not offsetHeight's 70px
  renderer.update("t1", "New");
  equal(element.laidOutHeight, before);
  renderer.update("t1", "Newer"); // and a second reset holds the same height, never more
  renderer.update("t1", "");
  equal(element.laidOutHeight, before);
  renderer.finish("t1", "New");
  equal(element.style.minHeight, "");
  equal(element.laidOutHeight, 30);
});

test("an unchanged text is not rewritten", () => {
  const { renderer } = setup();
  renderer.update("t1", "same");
  renderer.update("t1", "same");
  deepStrictEqual(renderer.elementFor("t1").writes, ["same"]);
});

test("a container is required", () => {
  throws(() => new TurnRenderer(null, { document: fakeDocument }), /container must be an element/);
});
