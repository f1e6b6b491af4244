// The default theme, plus the course's own components (registered globally for the Markdown pages).
import DefaultTheme from 'vitepress/theme'
import CoursePath from './CoursePath.vue'
import GpuAtlas from './components/GpuAtlas.vue'

export default {
  extends: DefaultTheme,
  enhanceApp({ app }) {
    app.component('CoursePath', CoursePath)
    app.component('GpuAtlas', GpuAtlas)
  },
}
