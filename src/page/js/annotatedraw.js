// A function declaration run with Runtime.callFunctionOn in the Broker's
// isolated world of the main frame (never the page's main world), awaiting
// its promise: decodes a screenshot (base64 `image`), draws each box of
// `boxes` ({ref, x, y, width, height} in image pixels, integers) as an
// outline with its ref number on an OffscreenCanvas that is never attached to
// any document, and returns the annotated image as base64 of `mime`
// (`quality` for JPEG). `scale` (image pixels per CSS pixel) grows the outline
// and the labels on high-density images, never below their 1x size. The page
// sees no element, no canvas and no event.
// Embedded by src/page/annotate.rs as ANNOTATE_DRAW.
async function (image, boxes, mime, quality, scale) {
  "use strict";
  const STROKE = '#ff00ff';
  const LABEL_TEXT = '#ffffff';
  const density = Math.max(1, Math.round(scale));
  const LINE = 2 * density;
  const binary = atob(image);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  const bitmap = await createImageBitmap(new Blob([bytes]), {
    colorSpaceConversion: 'none', premultiplyAlpha: 'none',
  });
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const g = canvas.getContext('2d', { colorSpace: 'srgb' });
  g.drawImage(bitmap, 0, 0);
  bitmap.close();
  g.lineWidth = LINE;
  g.strokeStyle = STROKE;
  g.textBaseline = 'top';
  const fontSize = 12 * density;
  g.font = 'bold ' + fontSize + 'px sans-serif';
  for (const box of boxes) {
    // The outline lies inside the box: its outer edge is the box's edge.
    g.strokeRect(box.x + LINE / 2, box.y + LINE / 2, box.width - LINE, box.height - LINE);
  }
  for (const box of boxes) {
    const label = String(box.ref);
    const pad = 3 * density;
    const width = Math.ceil(g.measureText(label).width) + 2 * pad;
    const height = fontSize + 4 * density;
    g.fillStyle = STROKE;
    g.fillRect(box.x, box.y, Math.min(width, box.width), Math.min(height, box.height));
    g.fillStyle = LABEL_TEXT;
    g.fillText(label, box.x + pad, box.y + 2 * density, Math.max(1, box.width - 2 * pad));
  }
  const blob = await canvas.convertToBlob(
    quality === null ? { type: mime } : { type: mime, quality: quality / 100 });
  const out = new Uint8Array(await blob.arrayBuffer());
  let text = '';
  const CHUNK = 0x8000;
  for (let i = 0; i < out.length; i += CHUNK) {
    text += String.fromCharCode.apply(null, out.subarray(i, i + CHUNK));
  }
  return btoa(text);
}
