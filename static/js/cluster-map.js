// The cluster map: the page carries each node's id, name, value and colour bin as data (#cluster-map-data); this
// draws one <rect> per node into its group, in rows, with the node's name and value as its tooltip, and a click on
// a mark opens that node's page. A file, not an inline handler: the Content-Security-Policy allows no inline
// script. The URL is the page's own node URL around the mark's id.
const SVG = "http://www.w3.org/2000/svg";

function drawMap() {
  const map = document.getElementById("cluster-map");
  const source = document.getElementById("cluster-map-data");
  if (!map || !source) return;
  const data = JSON.parse(source.textContent);
  map.querySelectorAll("g.map-group").forEach((group, g) => {
    const nodes = data.groups[g];
    const marks = document.createDocumentFragment();
    nodes.ids.forEach((id, i) => {
      const mark = nodes.marks[id];
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", data.x0 + (i % data.columns) * data.step);
      rect.setAttribute("y", nodes.y + Math.floor(i / data.columns) * data.step);
      rect.setAttribute("class", `m${nodes.bins[i]}${mark ? ` ${mark}` : ""}`);
      rect.dataset.id = id;
      rect.dataset.value = nodes.values[i];
      const title = document.createElementNS(SVG, "title");
      title.textContent = `${nodes.names[i]}: ${nodes.values[i]}${mark ? ` (${data.notes[mark]})` : ""}`;
      rect.appendChild(title);
      marks.appendChild(rect);
    });
    group.appendChild(marks);
  });
}

drawMap();  // a deferred script: the page is parsed

document.addEventListener("click", (event) => {
  const map = event.target.closest("#cluster-map");
  const mark = event.target.closest("rect[data-id]");
  if (!map || !mark) return;
  window.location.assign(`${map.dataset.urlHead}${encodeURIComponent(mark.dataset.id)}${map.dataset.urlTail}`);
});
