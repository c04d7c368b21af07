// The node page's thread grid: a click on a CPU cell loads that CPU's details into #cpu-detail through htmx.
// A file rather than an hx-vals "js:" expression, which would need eval (the Content-Security-Policy has none).
document.addEventListener("click", (event) => {
  const area = event.target.closest(".grid-click");
  const cell = event.target.closest("[data-cpu]");
  if (!area || !cell || !area.contains(cell)) return;
  htmx.ajax("GET", `${area.dataset.cpuUrl}?cpu=${encodeURIComponent(cell.dataset.cpu)}`, {target: "#cpu-detail"});
});
