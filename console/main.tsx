import { render } from 'preact';
import { App } from './app';
import './console.css';

render(<App />, document.getElementById('app')!);
