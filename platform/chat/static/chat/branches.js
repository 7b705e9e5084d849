/* The conversation's branches on the page (chat/branches.py on the server). Every message of every
 * branch is in the DOM, oldest first, with data-id and data-parent (the message it follows); the page
 * shows the path to one message, by default the newest. Messages with siblings (regenerated replies,
 * edited messages) get "‹ i / n ›": paging to a sibling shows it and the newest branch below it.
 * A message still being written has a temporary id ("new") until the server names it.
 *
 *   const branches = PagodaBranches.create(thread, strings); branches.refresh();
 */
(function () {
  "use strict";

  function create(thread, T) {
    let chosen = null; // the message whose path the reader paged to; null: the newest message's
    let newestWhenChosen = null; // a newer message since (a turn was sent) shows the newest again

    function parentFinder(all) {
      const byId = new Map();
      all.forEach((article) => { if (article.dataset.id) byId.set(article.dataset.id, article); });
      return (article) => (article.dataset.parent ? byId.get(article.dataset.parent) || null : null);
    }

    function pathTo(leaf, parentOf) {
      const path = new Set();
      for (let article = leaf; article && !path.has(article); article = parentOf(article)) path.add(article);
      return path;
    }

    // The newest message in `node`'s subtree (itself when it has no later turns).
    function newestUnder(node, all, parentOf) {
      for (let i = all.length - 1; i >= 0; i--) {
        if (pathTo(all[i], parentOf).has(node)) return all[i];
      }
      return node;
    }

    function navButton(className, text, label, disabled, onClick) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "icon " + className;
      button.textContent = text;
      button.setAttribute("aria-label", label);
      button.disabled = disabled;
      button.addEventListener("click", onClick);
      return button;
    }

    // Where a message's "‹ i / n ›" goes: a reply's meta line, or the actions line under a user message.
    function navPlace(article) {
      let place = article.querySelector(".msg-meta") || article.querySelector(".user-actions");
      if (!place) {
        place = document.createElement("div");
        place.className = "user-actions";
        article.append(place);
      }
      return place;
    }

    function refresh() {
      const all = Array.from(thread.querySelectorAll(".msg"));
      const parentOf = parentFinder(all);
      const newest = all.length ? all[all.length - 1] : null;
      if (chosen && (newestWhenChosen !== newest || !chosen.isConnected)) chosen = null;
      const shown = pathTo(chosen || newest, parentOf);
      all.forEach((article) => { article.hidden = !shown.has(article); });

      thread.querySelectorAll(".versions").forEach((el) => el.remove());
      const groups = new Map(); // siblings: the same parent and the same role
      all.forEach((article) => {
        const key = (article.dataset.parent || "") + "/" + (article.classList.contains("msg-user") ? "user" : "reply");
        if (!groups.has(key)) groups.set(key, []);
        groups.get(key).push(article);
      });
      groups.forEach((siblings) => {
        if (siblings.length < 2) return;
        siblings.forEach((article, i) => {
          if (!shown.has(article)) return;
          const show = (j) => {
            chosen = newestUnder(siblings[j], all, parentOf);
            newestWhenChosen = newest;
            refresh();
          };
          const nav = document.createElement("span");
          nav.className = "versions";
          const label = document.createElement("span");
          label.className = "version-label";
          label.textContent = (i + 1) + " / " + siblings.length;
          nav.append(navButton("version-prev", "\u2039", T.previous_version, i === 0, () => show(i - 1)), label,
                     navButton("version-next", "\u203a", T.next_version, i === siblings.length - 1, () => show(i + 1)));
          navPlace(article).prepend(nav);
        });
      });
    }

    return { refresh: refresh };
  }

  window.PagodaBranches = { create: create };
})();
