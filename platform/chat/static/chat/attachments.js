/* Files attached to the next message: the composer's paperclip uploads each one at once to
 * POST /chat/<id>/attachments/ (the server extracts its text and counts its tokens), shows it as a chip
 * with its token count, and the next user_message carries their ids. The server's refusals (too big, not a
 * PDF, empty, over the context) are said in the notice. Chips on a sent message link to the text the
 * model read.
 *
 *   const files = PagodaAttachments.create({input, list, uploadUrl, strings, onChange, showNotice});
 *   files.ids(); files.busy(); const sent = files.take(); files.restore(sent);
 *   PagodaAttachments.renderChips(article, [{id, name, num_tokens}])
 */
(function () {
  "use strict";

  function csrfToken() {
    const field = document.querySelector("[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  function tokensText(T, count) {
    return T.attach_tokens.replace("{count}", Number(count).toLocaleString());
  }

  // Chips under a user message: each file's name and tokens, linking to the text the model read.
  function renderChips(article, files) {
    const T = JSON.parse(document.getElementById("chat-config").textContent).strings;
    article.querySelectorAll(".attachments").forEach((el) => el.remove());
    if (!files || !files.length) return;
    const box = document.createElement("div");
    box.className = "attachments";
    files.forEach((file) => {
      const link = document.createElement("a");
      link.className = "attachment";
      link.href = "/chat/attachments/" + file.id + "/";
      link.target = "_blank";
      link.rel = "noopener";
      link.dataset.id = file.id;
      const name = document.createElement("span");
      name.className = "attachment-name";
      name.textContent = file.name;
      const tokens = document.createElement("small");
      tokens.textContent = tokensText(T, file.num_tokens);
      link.append(name, " ", tokens);
      box.append(link);
    });
    article.querySelector(".msg-body").after(box);
  }

  function create(options) {
    const T = options.strings;
    const list = options.list;
    let files = []; // {id, name, num_tokens, max_tokens, url} uploaded, not sent yet
    let uploading = 0;

    function render() {
      list.replaceChildren();
      files.forEach((file) => {
        const chip = document.createElement("span");
        chip.className = "attachment draft";
        chip.dataset.id = file.id;
        const name = document.createElement("span");
        name.className = "attachment-name";
        name.textContent = file.name;
        const tokens = document.createElement("small");
        tokens.textContent = tokensText(T, file.num_tokens);
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "icon detach";
        remove.textContent = "\u00d7";
        remove.title = T.attach_remove;
        remove.setAttribute("aria-label", T.attach_remove + ": " + file.name);
        remove.addEventListener("click", () => detach(file));
        chip.append(name, " ", tokens, remove);
        list.append(chip);
      });
      if (uploading) {
        const wait = document.createElement("span");
        wait.className = "attachment uploading";
        wait.textContent = T.attach_uploading;
        list.append(wait);
      }
      list.hidden = !files.length && !uploading;
      options.onChange();
    }

    function refusal(file, body) {
      const error = (body && body.error) || {};
      const text = T["attach_error_" + error.code];
      return file.name + ": " + (text || error.message || T.attach_failed);
    }

    async function upload(file) {
      uploading++;
      render();
      try {
        const form = new FormData();
        form.append("file", file);
        const response = await fetch(options.uploadUrl, {
          method: "POST", body: form, credentials: "same-origin",
          headers: { "X-CSRFToken": csrfToken(), "Accept": "application/json" },
        });
        let body = null;
        try { body = await response.json(); } catch (e) { body = null; }
        if (response.status === 201 && body) files.push(body);
        else options.showNotice(refusal(file, body));
      } catch (e) {
        options.showNotice(file.name + ": " + T.attach_failed);
      } finally {
        uploading--;
        render();
      }
    }

    function detach(file) {
      files = files.filter((f) => f !== file);
      render();
      fetch("/chat/attachments/" + file.id + "/delete/", {
        method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() },
      }).catch(() => {});
    }

    options.input.addEventListener("change", () => {
      options.showNotice("");
      Array.from(options.input.files).forEach(upload);
      options.input.value = "";
    });

    return {
      ids: () => files.map((f) => f.id),
      busy: () => uploading > 0,
      take: () => { const sent = files; files = []; render(); return sent; },
      restore: (sent) => { files = sent.concat(files); render(); },
    };
  }

  window.PagodaAttachments = { create: create, renderChips: renderChips };
})();
