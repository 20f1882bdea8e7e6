import { describe, expect, it } from 'vitest';
import { PASSIVE, vmOf } from './fixtures/games/harness';

describe('marshalling edge cases (decision 10)', () => {
  it('an integral input beyond 32 bits arrives as a float instead of failing the tick', () => {
    const { vm } = vmOf(PASSIVE + `function handle_input(id, input, state)
        state.seen = { t = math.type(input.big), v = input.big, small = math.type(input.small) }
        return state
      end
      function get_state(id, state) return state.seen or {} end`);
    vm.init();
    vm.join('a');
    vm.input('a', { big: 2 ** 40, small: -5 });
    expect(vm.tick()).toMatchObject({ inputFailures: 0, finished: null });
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ t: 'float', v: 2 ** 40, small: 'integer' });
  });

  it('mixed keys keep JSON object order and collisions; __proto__ is dropped', () => {
    const { vm } = vmOf(PASSIVE + `function get_state(id, state)
        local t = {}
        t.b = 1
        t[2] = "two"
        t["10"] = "ten"
        t.a = 2
        t[1] = "int one"
        t["1"] = "string one"
        t.__proto__ = { x = 1 }
        return { plain = { z = 1, y = 2, x = 3 }, mixed = t }
      end`);
    vm.init();
    vm.join('a');
    const text = vm.viewJson('a');
    expect(text).toBe('{"plain":{"z":1,"y":2,"x":3},"mixed":{"1":"string one","2":"two","10":"ten","b":1,"a":2}}');
  });

  it('a decoded input can serve as a metatable (its "__index" is seen)', () => {
    const { vm } = vmOf(PASSIVE + `function handle_input(id, input, state)
        state.got = setmetatable({}, input).missing
        return state
      end
      function get_state(id, state) return { got = state.got } end`);
    vm.init();
    vm.join('a');
    vm.input('a', { __index: { missing: 'found' } });
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ got: 'found' });
  });
});
