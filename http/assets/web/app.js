// disparo's web panel: the CSV preview and column mapping of a new campaign, the kanban's
// drag and drop, the example variables of a template's preview, the template builder's
// preview, the phone menu, refused forms' fields and the toasts. Everything else is htmx.
(function () {
  "use strict";

  // One CSV line split on `sep`, with "quoted" fields.
  function splitLine(line, sep) {
    var out = [], cur = "", quoted = false;
    for (var i = 0; i < line.length; i++) {
      var ch = line[i];
      if (quoted) {
        if (ch === '"') {
          if (line[i + 1] === '"') { cur += '"'; i++; } else { quoted = false; }
        } else { cur += ch; }
      } else if (ch === '"') { quoted = true; }
      else if (ch === sep) { out.push(cur); cur = ""; }
      else { cur += ch; }
    }
    out.push(cur);
    return out;
  }

  // The first rows of the chosen CSV as a table, and its header in the column selects.
  // (Delegated: the form may arrive later, swapped in by htmx.)
  function csvPreview() {
    document.addEventListener("change", function (e) {
      var input = e.target;
      if (!input || input.id !== "arquivo") return;
      var file = input.files && input.files[0];
      if (!file) return;
      file.slice(0, 65536).arrayBuffer().then(function (buf) {
        // UTF-8 when it is UTF-8 (a sequence cut at the slice's end waits, not fails), else
        // Windows-1252, Excel's "CSV (separado por vírgulas)" in Portuguese: the server reads
        // it the same way (issue 47).
        var text, note = "";
        try {
          text = new TextDecoder("utf-8", { fatal: true }).decode(buf, { stream: true });
        } catch (err) {
          text = new TextDecoder("windows-1252").decode(buf);
          note = "Arquivo em Windows-1252 (o CSV do Excel): os acentos foram convertidos.";
        }
        document.getElementById("previa-codificacao").textContent = note;
        var lines = text.replace(/^\uFEFF/, "").split(/\r?\n/)
          .filter(function (l) { return l.trim() !== ""; }).slice(0, 6);
        if (!lines.length) return;
        var sep = lines[0].split(";").length >= lines[0].split(",").length ? ";" : ",";
        var rows = lines.map(function (l) { return splitLine(l, sep); });
        var table = document.getElementById("previa-tabela");
        table.textContent = "";
        var head = table.createTHead().insertRow();
        rows[0].forEach(function (h) {
          var th = document.createElement("th");
          th.scope = "col";
          th.textContent = h;
          head.appendChild(th);
        });
        var body = table.createTBody();
        rows.slice(1).forEach(function (r) {
          var tr = body.insertRow();
          r.forEach(function (c) { tr.insertCell().textContent = c; });
        });
        ["coluna_numero", "coluna_nome"].forEach(function (id) {
          var select = document.getElementById(id);
          while (select.options.length > 1) select.remove(1);
          rows[0].forEach(function (h) {
            var o = document.createElement("option");
            o.value = h.trim();
            o.textContent = h.trim();
            select.appendChild(o);
          });
        });
        csvHeaders = rows[0].map(function (h) { return h.trim(); }).filter(Boolean);
        resetVariables();
        document.getElementById("previa-csv").hidden = false;
      });
    });
  }

  // The template's variables are chosen among the CSV's columns (issue 47: a typed column
  // that the contacts do not have made every contact invalid). The server reads the name
  // column as `nome` and the number column as `numero`, so those are sent by those names.
  var csvHeaders = [];

  function columnName(header) {
    var lower = header.toLowerCase();
    var nameCol = (document.getElementById("coluna_nome") || {}).value || "";
    var numberCol = (document.getElementById("coluna_numero") || {}).value || "";
    if (nameCol ? header === nameCol : lower === "nome") return "nome";
    if (numberCol && header === numberCol) return "numero";
    return lower;
  }

  function syncVariables() {
    var hidden = document.getElementById("variaveis-valor");
    if (!hidden) return;
    var chosen = [];
    document.querySelectorAll("#variaveis-lista select").forEach(function (s) {
      if (s.value) chosen.push(columnName(s.value));
    });
    hidden.value = chosen.join(",");
  }

  function addVariable() {
    var list = document.getElementById("variaveis-lista");
    var li = document.createElement("li");
    var n = list.children.length + 1;
    var label = document.createElement("label");
    label.textContent = "Variável {{" + n + "}} ";
    var select = document.createElement("select");
    var none = document.createElement("option");
    none.value = "";
    none.textContent = "(escolha a coluna)";
    select.appendChild(none);
    csvHeaders.forEach(function (h) {
      var o = document.createElement("option");
      o.value = h;
      o.textContent = h;
      select.appendChild(o);
    });
    label.appendChild(select);
    var remove = document.createElement("button");
    remove.type = "button";
    remove.className = "secondary outline";
    remove.textContent = "Remover";
    remove.setAttribute("aria-label", "Remover {{" + n + "}}");
    remove.addEventListener("click", function () { li.remove(); renumber(); syncVariables(); });
    li.appendChild(label);
    li.appendChild(remove);
    list.appendChild(li);
    select.focus();
  }

  function renumber() {
    document.querySelectorAll("#variaveis-lista li").forEach(function (li, i) {
      li.querySelector("label").firstChild.textContent = "Variável {{" + (i + 1) + "}} ";
      li.querySelector("button").setAttribute("aria-label", "Remover {{" + (i + 1) + "}}");
    });
  }

  function resetVariables() {
    var list = document.getElementById("variaveis-lista");
    var more = document.getElementById("variavel-mais");
    if (!list || !more) return;
    list.textContent = "";
    more.disabled = csvHeaders.length === 0;
    syncVariables();
  }

  function variablePicker() {
    document.addEventListener("click", function (e) {
      if (e.target && e.target.id === "variavel-mais") addVariable();
    });
    document.addEventListener("change", function (e) {
      var t = e.target;
      if (!t) return;
      if (t.closest && t.closest("#variaveis-lista")) syncVariables();
      if (t.id === "coluna_nome" || t.id === "coluna_numero") syncVariables();
    });
    document.addEventListener("submit", function (e) {
      if (e.target && e.target.id === "nova-campanha") syncVariables();
    }, true);
  }

  // Cards dragged between the board's columns; the drop asks the server to move the task
  // and swaps the board it answers.
  function kanban() {
    document.addEventListener("dragstart", function (e) {
      var card = e.target.closest && e.target.closest("[data-tarefa]");
      if (!card) return;
      e.dataTransfer.setData("text/plain", card.dataset.tarefa);
      e.dataTransfer.effectAllowed = "move";
    });
    document.addEventListener("dragover", function (e) {
      if (e.target.closest && e.target.closest("[data-coluna]")) e.preventDefault();
    });
    document.addEventListener("drop", function (e) {
      var column = e.target.closest && e.target.closest("[data-coluna]");
      if (!column) return;
      e.preventDefault();
      var id = e.dataTransfer.getData("text/plain");
      if (!id) return;
      htmx.ajax("POST", "/tarefas/" + encodeURIComponent(id) + "/mover", {
        target: "#quadro",
        swap: "outerHTML",
        values: { status: column.dataset.coluna },
      });
    });
  }

  // A template's body with example values typed by the operator for each {{n}}.
  function templatePreview(root) {
    root.querySelectorAll(".previa[data-corpo]:not([data-pronta])").forEach(function (box) {
      box.setAttribute("data-pronta", "");
      var body = box.dataset.corpo;
      var pattern = /\{\{\s*(\w+)\s*\}\}/g;
      var names = [], values = {}, m;
      while ((m = pattern.exec(body))) {
        if (names.indexOf(m[1]) < 0) names.push(m[1]);
      }
      var holder = box.querySelector(".variaveis");
      var text = box.querySelector(".texto");
      function paint() {
        text.textContent = body.replace(pattern, function (_, n) {
          return values[n] || "{{" + n + "}}";
        });
      }
      names.forEach(function (n) {
        var label = document.createElement("label");
        label.textContent = "Exemplo para {{" + n + "}} ";
        var input = document.createElement("input");
        input.value = "exemplo " + n;
        values[n] = input.value;
        input.addEventListener("input", function () { values[n] = input.value; paint(); });
        label.appendChild(input);
        holder.appendChild(label);
      });
      paint();
    });
  }

  // A form marked `data-limpar` is emptied once htmx has sent it successfully.
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail.elt;
    if (e.detail.successful && form && form.matches && form.matches("form[data-limpar]")) {
      form.reset();
    }
  });

  // A campaign's page follows its status live (issue 47 item 8): the progress pushed over SSE
  // carries the status; when it is no longer the one the page was drawn for (hygiene done,
  // approved, paused elsewhere, finished), the page is drawn again with its new actions.
  function followStatus() {
    var shown = document.getElementById("status");
    var pushed = document.querySelector("#progresso .progresso[data-status]");
    if (!shown || !pushed || !shown.dataset.status) return;
    if (pushed.dataset.status !== shown.dataset.status) {
      shown.dataset.status = pushed.dataset.status;
      window.location.reload();
    }
  }
  document.addEventListener("htmx:sseMessage", followStatus);
  document.addEventListener("htmx:afterSettle", followStatus);

  // The template builder's preview (issue 47 item 6): header, body with each {{n}} shown as
  // the column that fills it, footer and buttons, as the contact will see them; text only.
  function builderPreview() {
    document.addEventListener("input", function (e) {
      var form = e.target && e.target.closest && e.target.closest("#form-template");
      if (form) paintBuilder(form);
    });
    document.addEventListener("change", function (e) {
      var form = e.target && e.target.closest && e.target.closest("#form-template");
      if (form) paintBuilder(form);
    });
  }
  function paintBuilder(form) {
    var out = document.getElementById("tpl-previa");
    if (!out) return;
    var cols = form.elements.colunas.value.split(",").map(function (c) { return c.trim(); });
    out.textContent = "";
    var image = form.elements.header_type.value === "image";
    form.querySelector(".cabecalho-texto").hidden = image;
    form.querySelector(".cabecalho-imagem").hidden = !image;
    var file = form.elements.header_example.files[0];
    if (image && file) {
      var img = document.createElement("img");
      img.alt = "Imagem do cabeçalho";
      img.className = "cabecalho";
      img.src = URL.createObjectURL(file);
      out.appendChild(img);
      out.appendChild(document.createElement("br"));
    } else if (image) {
      var none = document.createElement("em");
      none.textContent = "[imagem do cabeçalho]";
      out.appendChild(none);
      out.appendChild(document.createElement("br"));
    }
    var header = image ? "" : form.elements.header_text.value.trim();
    if (header) { var h = document.createElement("strong"); h.textContent = header; out.appendChild(h); out.appendChild(document.createElement("br")); }
    var body = document.createElement("span");
    body.className = "texto";
    body.textContent = form.elements.body.value.replace(/\{\{\s*(\d+)\s*\}\}/g, function (_, n) {
      var c = cols[Number(n) - 1];
      return "[" + (c || "variável " + n) + "]";
    });
    out.appendChild(body);
    var footer = form.elements.footer_text.value.trim();
    if (footer) { out.appendChild(document.createElement("br")); var f = document.createElement("small"); f.textContent = footer; out.appendChild(f); }
    var kinds = form.querySelectorAll("[name=botao_tipo]"), texts = form.querySelectorAll("[name=botao_texto]");
    for (var i = 0; i < kinds.length; i++) {
      if (!kinds[i].value || !texts[i].value.trim()) continue;
      out.appendChild(document.createElement("br"));
      var b = document.createElement("span"); b.className = "botao"; b.textContent = texts[i].value.trim(); out.appendChild(b);
    }
  }

  // On a phone the menu folds behind a "Menu" button (issue 47 item 11); wider, it is
  // always open and the button hidden (CSS).
  document.addEventListener("click", function (e) {
    var button = e.target && e.target.closest && e.target.closest("#abrir-menu");
    if (!button) return;
    var menu = document.getElementById("menu-principal");
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", open ? "true" : "false");
    menu.classList.toggle("aberto", open);
  });

  // A refused form (issue 47 item 5): htmx swapped only the alert into #avisos, so the form
  // keeps its file, ticks and mapping; the field the API named (the alert's data-campo) is
  // marked invalid, tied to the alert and focused.
  var lastForm = null;
  document.addEventListener("htmx:beforeRequest", function (e) {
    var form = e.detail.elt && e.detail.elt.closest ? e.detail.elt.closest("form") : null;
    if (!form) return;
    lastForm = form;
    form.querySelectorAll("[aria-invalid]").forEach(function (el) {
      el.removeAttribute("aria-invalid");
      el.removeAttribute("aria-describedby");
    });
  });
  document.addEventListener("htmx:afterSwap", function () {
    var alert = document.querySelector("#avisos [data-campo]");
    if (!alert || !lastForm) return;
    var controls = lastForm.querySelectorAll('[name="' + CSS.escape(alert.getAttribute("data-campo")) + '"]');
    if (!controls.length) return;
    controls.forEach(function (el) {
      el.setAttribute("aria-invalid", "true");
      el.setAttribute("aria-describedby", alert.id);
    });
    var target = controls[0];
    if (target.type === "hidden") {
      var box = target.closest("fieldset");
      var shown = box && box.querySelector("select, input:not([type=hidden]), button:not([disabled])");
      if (shown) target = shown;
    }
    target.focus();
  });

  // A toast for every action's result (issue 47 item 8). The server names it in `HX-Trigger`
  // (event `aviso`) when its answer moves to another page; an answer that draws its own
  // notice (`.aviso`, an error alert included) shows that notice's text too. The toast
  // outlives the page change (HX-Location swaps the body, a campaign page may reload itself:
  // kept in sessionStorage) and leaves after 6 s.
  var toast = null;
  try { toast = JSON.parse(sessionStorage.getItem("disparo:aviso") || "null"); } catch (err) { toast = null; }
  function showToast(text, kind) {
    text = (text || "").trim();
    if (!text) return;
    toast = { text: text, kind: kind, until: Date.now() + 6000 };
    try { sessionStorage.setItem("disparo:aviso", JSON.stringify(toast)); } catch (err) { /* private mode */ }
    paintToast();
    setTimeout(paintToast, 6100);
  }
  function paintToast() {
    var box = document.getElementById("toasts");
    if (!box) {
      box = document.createElement("div");
      box.id = "toasts";
      box.className = "toasts";
      box.setAttribute("aria-live", "polite");
      box.setAttribute("aria-atomic", "true");
      document.body.appendChild(box);
    }
    if (!toast || Date.now() > toast.until) {
      toast = null;
      try { sessionStorage.removeItem("disparo:aviso"); } catch (err) { /* private mode */ }
      box.textContent = "";
      return;
    }
    var shown = box.querySelector(".toast");
    if (shown && shown.textContent === toast.text) return;
    box.textContent = "";
    var p = document.createElement("p");
    p.className = "toast aviso " + toast.kind;
    p.textContent = toast.text;
    box.appendChild(p);
  }
  document.addEventListener("aviso", function (e) {
    showToast(typeof e.detail.value === "string" ? e.detail.value : "", "ok");
  });
  document.addEventListener("htmx:beforeSwap", function (e) {
    var cfg = e.detail.requestConfig;
    if (!cfg || String(cfg.verb).toLowerCase() !== "post" || !e.detail.serverResponse) return;
    var answer = document.createElement("template");
    answer.innerHTML = e.detail.serverResponse;
    var notice = answer.content.querySelector(".aviso");
    if (!notice) return;
    var kind = notice.classList.contains("erro") ? "erro"
      : notice.classList.contains("atencao") ? "atencao" : "ok";
    showToast(notice.textContent, kind);
  });
  document.addEventListener("htmx:afterSettle", paintToast);
  document.addEventListener("DOMContentLoaded", function () {
    paintToast();
    if (toast) setTimeout(paintToast, toast.until - Date.now() + 100);
  });

  csvPreview();
  builderPreview();
  variablePicker();
  kanban();
  document.addEventListener("DOMContentLoaded", function () { templatePreview(document); });
  // Content htmx swaps in (a page reached through HX-Location) gets its previews too.
  document.addEventListener("htmx:load", function (e) { templatePreview(e.detail.elt.parentNode || document); });
})();
