// The hello-gpu course site. Navigation and sidebar are built from docs/course/outline.json, the one
// source of chapter numbers, titles, files and status (`hello-gpu course sync` writes the READMEs'
// tables of contents from the same file). Only chapters with status "written" whose page exists get a
// link: a written chapter whose file is missing here is left out with a warning, so the site never
// links a page it does not have.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitepress'
import outline from '../course/outline.json' with { type: 'json' }

const docs = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** "第 N 章 <title>" or "附录 X <title>": the H1 every chapter page starts with. */
export function chapterHeading(chapter) {
  return typeof chapter.number === 'number'
    ? `第 ${chapter.number} 章 ${chapter.title}`
    : `附录 ${chapter.number} ${chapter.title}`
}

/** "/course/part0/ch00-preface" for "course/part0/ch00-preface.md"; "/atlas/" for "atlas/index.md". */
function route(file) {
  return '/' + file.replace(/\.md$/, '').replace(/(^|\/)index$/, '$1')
}

/** The written chapters whose page exists, by part; a warning for each written one that is missing. */
function writtenParts() {
  const parts = []
  for (const part of outline.parts) {
    const items = []
    for (const chapter of part.chapters) {
      if (chapter.status !== 'written') continue
      if (!fs.existsSync(path.join(docs, chapter.file))) {
        console.warn(`[hello-gpu] outline: chapter ${chapter.number} is "written" but docs/${chapter.file} is missing; left out of the site`)
        continue
      }
      items.push({ text: chapterHeading(chapter), link: route(chapter.file) })
    }
    if (items.length) parts.push({ text: part.title, collapsed: false, items })
  }
  return parts
}

/** The reference pages docs/*.md (besides the home page), each titled by its first H1. */
function referencePages() {
  return fs.readdirSync(docs)
    .filter((name) => name.endsWith('.md') && name !== 'index.md')
    .sort()
    .map((name) => {
      const heading = fs.readFileSync(path.join(docs, name), 'utf8').match(/^# (.+)$/m)
      return { text: heading ? heading[1].trim() : name, link: '/' + name.replace(/\.md$/, '') }
    })
}

/** Every part with every chapter, for the home pages' path through the course: a link only where the
 * chapter is written and its page exists. */
function courseMap() {
  return outline.parts.map((part) => ({
    title: part.title,
    chapters: part.chapters.map((chapter) => ({
      heading: chapterHeading(chapter),
      summary: chapter.summary,
      issue: chapter.issue ?? null,
      link: chapter.status === 'written' && fs.existsSync(path.join(docs, chapter.file)) ? route(chapter.file) : null,
    })),
  }))
}

const parts = writtenParts()
/** The course's pages outside the chapters (exercises, interactive pictures, the atlas), those that exist:
 * in the sidebar, so each has neighbours for its previous/next links instead of falling back to chapter 0. */
function practicePages() {
  return [['course/exercises.md', '练习的自我检查'], ['course/interactive.md', '交互图'], ['atlas/index.md', 'GPU 图谱']]
    .filter(([file]) => fs.existsSync(path.join(docs, file)))
    .map(([file, text]) => ({ text, link: route(file) }))
}

const sidebar = [...parts, { text: '动手与图', items: practicePages() },
                 { text: '参考', collapsed: true, items: referencePages() }]
const firstChapter = parts.length ? parts[0].items[0].link : '/'

// Chinese search: MiniSearch splits on spaces and punctuation, which leaves a Chinese sentence as one
// token. This tokenizer keeps Latin words whole and turns each run of CJK characters into its single
// characters and its pairs of neighbours, so "归约" finds a page that says "树状归约". It runs both when
// the index is built (Node) and in the browser (VitePress sends it as source text), so it must not use
// anything from outside its own body.
const tokenize = (text) => {
  const tokens = []
  const pieces = text.match(/[\u3400-\u9fff\uf900-\ufaff]+|[^\s\u3000-\u303f\uff00-\uffef\u3400-\u9fff\uf900-\ufaff.,;:!?()[\]{}<>"'`|/\\=+*&^%$#@~-]+/g) || []
  for (const piece of pieces) {
    if (/[\u3400-\u9fff\uf900-\ufaff]/.test(piece)) {
      const chars = Array.from(piece)
      for (let i = 0; i < chars.length; i++) {
        tokens.push(chars[i])
        if (i + 1 < chars.length) tokens.push(chars[i] + chars[i + 1])
      }
    } else {
      tokens.push(piece)
    }
  }
  return tokens
}

export default defineConfig({
  title: 'hello-gpu',
  description: '看懂 GPU，亲手优化每一次计算：测量 → 定位 → 只改一处 → 再测量',
  cleanUrls: true,
  lastUpdated: false,
  // `<<< @/../path` includes repository files from outside docs/: `@` is docs/ (the srcDir), and the
  // snippet is read from disk when the page is rendered. The dev server watches and serves from the
  // repository root too, so an edited included file reloads the page.
  vite: { server: { fs: { allow: [path.resolve(docs, '..')] } } },
  locales: {
    root: { label: '简体中文', lang: 'zh-CN' },
    en: {
      label: 'English',
      lang: 'en',
      description: 'Learn GPU operator optimisation by measuring: a Python package, a command line and a course (in Chinese)',
      themeConfig: {
        nav: [
          { text: 'Home', link: '/en/' },
          { text: 'Course (Chinese)', link: firstChapter },
        ],
      },
    },
  },
  themeConfig: {
    nav: [
      { text: '首页', link: '/' },
      { text: '课程', link: firstChapter },
      { text: '参考', link: '/measurement' },
      { text: 'GPU 图谱', link: '/atlas/' },
    ],
    sidebar,
    course: courseMap(),
    outline: { level: [2, 3], label: '本页目录' },
    docFooter: { prev: '上一页', next: '下一页' },
    search: {
      provider: 'local',
      options: {
        miniSearch: {
          options: { tokenize },
          searchOptions: { combineWith: 'AND', fuzzy: 0.1, prefix: true },
        },
      },
    },
  },
})
