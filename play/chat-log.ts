/** The chat panel's list: player lines and game events, newest at the bottom, bounded. */
const MAX_LINES = 200;

export class ChatLog {
  constructor(private readonly list: HTMLOListElement) {}

  say(who: 'you' | 'them', name: string, text: string): void {
    const line = document.createElement('li');
    line.className = who === 'you' ? 'from-you' : 'from-them';
    const label = document.createElement('b');
    label.textContent = `${name}: `;
    line.append(label, document.createTextNode(text));
    this.#add(line);
  }

  event(text: string): void {
    const line = document.createElement('li');
    line.className = 'event';
    line.textContent = text;
    this.#add(line);
  }

  clear(): void {
    this.list.replaceChildren();
  }

  #add(line: HTMLLIElement): void {
    this.list.append(line);
    while (this.list.childElementCount > MAX_LINES) this.list.firstElementChild!.remove();
    this.list.scrollTop = this.list.scrollHeight;
  }
}
