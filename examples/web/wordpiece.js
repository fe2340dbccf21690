// BERT's uncased WordPiece tokenizer (what all-MiniLM-L6-v2 uses), written for the web demo:
// clean the text, lowercase and strip accents, split on whitespace, punctuation and CJK
// characters, then match each word greedily against the vocabulary, longest piece first,
// continuations prefixed "##". A word with no match (or longer than 100 characters) is
// [UNK]. The ids equal transformers' BertTokenizer for the demo's sentences (tested).

const MAX_WORD_CHARS = 100;

function isControl(ch) {
  if (ch === "\t" || ch === "\n" || ch === "\r") return false;
  return /\p{Cc}|\p{Cf}/u.test(ch);
}

function isPunctuation(ch) {
  const c = ch.codePointAt(0);
  // BERT counts every non-alphanumeric ASCII symbol as punctuation, as well as Unicode P*.
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return /\p{P}/u.test(ch);
}

function isCjk(ch) {
  const c = ch.codePointAt(0);
  return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x20000 && c <= 0x2a6df) ||
         (c >= 0x2a700 && c <= 0x2b73f) || (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b820 && c <= 0x2ceaf) ||
         (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

// Words and punctuation marks of `text`, lowercased, without accents.
function basicTokens(text) {
  let clean = "";
  for (const ch of text) {
    const c = ch.codePointAt(0);
    if (c === 0 || c === 0xfffd || isControl(ch)) continue;
    clean += /\s/u.test(ch) ? " " : isCjk(ch) ? ` ${ch} ` : ch;
  }
  const words = [];
  for (const raw of clean.split(" ")) {
    if (!raw) continue;
    const word = raw.toLowerCase().normalize("NFD").replace(/\p{Mn}/gu, "");
    let current = "";
    for (const ch of word) {
      if (isPunctuation(ch)) {
        if (current) words.push(current);
        words.push(ch);
        current = "";
      } else {
        current += ch;
      }
    }
    if (current) words.push(current);
  }
  return words;
}

export class WordPiece {
  // vocab: the tokens in id order (vocab.txt's lines).
  constructor(vocab) {
    this.ids = new Map(vocab.map((token, id) => [token, id]));
    for (const t of ["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
      if (!this.ids.has(t)) throw new Error(`the vocabulary has no ${t}`);
  }

  pieces(word) {
    const chars = Array.from(word);
    if (chars.length > MAX_WORD_CHARS) return [this.ids.get("[UNK]")];
    const out = [];
    for (let start = 0; start < chars.length;) {
      let end = chars.length, id;
      for (; end > start; --end) {
        const piece = (start > 0 ? "##" : "") + chars.slice(start, end).join("");
        id = this.ids.get(piece);
        if (id !== undefined) break;
      }
      if (end === start) return [this.ids.get("[UNK]")];
      out.push(id);
      start = end;
    }
    return out;
  }

  // [CLS] pieces [SEP], truncated and padded to `length`: { ids, mask } as BigInt64Arrays
  // (the exported program takes int64 input_ids and attention_mask).
  encode(text, length) {
    const pieces = basicTokens(text).flatMap((w) => this.pieces(w)).slice(0, length - 2);
    const tokens = [this.ids.get("[CLS]"), ...pieces, this.ids.get("[SEP]")];
    const ids = new BigInt64Array(length).fill(BigInt(this.ids.get("[PAD]")));
    const mask = new BigInt64Array(length);
    tokens.forEach((t, i) => { ids[i] = BigInt(t); mask[i] = 1n; });
    return { ids, mask };
  }
}
