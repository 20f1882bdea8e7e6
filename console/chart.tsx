import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface Line {
  label: string;
  color: string;
  /** How the legend writes a value. */
  format?: (v: number | null) => string;
}

/**
 * A live time series: the first row of `data` is epoch seconds, one row per
 * line after it. The chart is made once and fed new data in place, and it
 * follows its box's width (a phone gets a narrow one).
 */
export function Chart(props: { title: string; lines: Line[]; data: (number | null)[][]; testId?: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = box.current!;
    const options: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height: 180,
      series: [{}, ...props.lines.map((l) => ({ label: l.label, stroke: l.color, width: 2, fill: l.color + '22', ...(l.format ? { value: (_u: uPlot, v: number | null) => l.format!(v) } : {}) }))],
      axes: [
        { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.15)' } },
        { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.15)' }, size: 50 },
      ],
      scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min ?? 0), Math.max(1, (max ?? 1) * 1.15)] } },
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    };
    plot.current = new uPlot(options, props.data as uPlot.AlignedData, el);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height: 180 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(props.data as uPlot.AlignedData);
  }, [props.data]);

  return (
    <figure class="chart" data-testid={props.testId} data-points={props.data[0]?.length ?? 0}>
      <figcaption>{props.title}</figcaption>
      <div ref={box} class="chart-box" />
    </figure>
  );
}
