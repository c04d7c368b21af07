// The cluster map: a click on a node's mark opens that node's page. A file, not an inline handler: the
// Content-Security-Policy allows no inline script. The URL is the page's own node URL around the mark's id.
document.addEventListener("click", (event) => {
  const map = event.target.closest("#cluster-map");
  const mark = event.target.closest("rect[data-id]");
  if (!map || !mark) return;
  window.location.assign(`${map.dataset.urlHead}${encodeURIComponent(mark.dataset.id)}${map.dataset.urlTail}`);
});
