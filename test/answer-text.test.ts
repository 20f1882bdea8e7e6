import { describe, expect, it } from 'vitest';
import { jsonText, withAnswerText } from '../runtime/platform/answer-text';

describe('answer text', () => {
  it('answers a value taken with withAnswerText from its kept text, and the value can no longer change under it', () => {
    const profile = withAnswerText({ id: 'a', metadata: { level: 3, tags: ['x'] } });
    expect(jsonText(profile)).toBe('{"id":"a","metadata":{"level":3,"tags":["x"]}}');
    expect(() => {
      (profile.metadata as { level: number }).level = 4;
    }).toThrow(TypeError);
    expect(() => {
      profile.metadata.tags.push('y');
    }).toThrow(TypeError);
    expect(jsonText(profile)).toBe(JSON.stringify(profile));
  });

  it('serializes any other value as JSON.stringify does', () => {
    const plain = { a: 1, b: [true, null], c: undefined };
    expect(jsonText(plain)).toBe(JSON.stringify(plain));
    plain.a = 2;
    expect(jsonText(plain)).toBe('{"a":2,"b":[true,null]}');
    expect(jsonText('text')).toBe('"text"');
    expect(jsonText(null)).toBe('null');
  });
});
