// The jobs page: ticking a job in the list switches its form's "jobs" choice to the picked ones, and
// unticking the last one switches it back to every schedulable job (a delegated listener, so the rows
// HTMX swaps in on filtering or paging behave the same).
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("input[type=checkbox][data-pick]")) return;
    var form = box.form;
    if (!form) return;
    var picked = document.querySelectorAll('input[type=checkbox][name="' + box.name + '"][form="' + form.id + '"]:checked');
    var scope = box.name === "jobs" ? "scope" : box.name.replace(/jobs$/, "scope");
    var radio = form.querySelector('input[type=radio][name="' + scope + '"][value="' + (picked.length ? "picked" : "all") + '"]');
    if (radio) radio.checked = true;
  });
})();
